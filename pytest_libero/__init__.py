"""pytest-libero: natively scored LIBERO episodes as pytest cases."""

from __future__ import annotations

__version__ = "0.1.0"
