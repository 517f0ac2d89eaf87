"""Layer 4: the sans-I/O scheduler and the asyncio executor that drives it."""
