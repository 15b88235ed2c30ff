"""Bounded text: what a server, a traceback or an input says is cut before it is shown.

A policy server's error can be megabytes; printed whole it buries the run's output and
is copied into every record. Everything shown or recorded goes through :func:`clipped`;
the full text is kept once, in one file, by whoever has one to keep it in.
"""

from __future__ import annotations

from typing import Final

MESSAGE_LIMIT: Final = 2000
"""Characters of a foreign text (server error, traceback, echoed input) shown or recorded."""


def clipped(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text``, or its first ``limit`` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"
