"""Integrations at the edge of planrail (each behind an extra): ``planrail.integrations.mcp``."""
