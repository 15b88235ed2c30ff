"""Kept for the GR00T tests, which import ``free_port`` from here; its home is
harness/servers.py, where the other server tests and the benchmarks take it from."""

from __future__ import annotations

from harness.servers import free_port

__all__ = ["free_port"]
