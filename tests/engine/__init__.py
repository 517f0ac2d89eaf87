"""Tests of the engine: the sans-I/O scheduler, the asyncio executor and the Python API."""
