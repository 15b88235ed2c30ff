"""Bounded text: what a server, a traceback or an input says is cut before it is shown.

A policy server's error can be megabytes; printed whole it buries the run's output and
is copied into every record. Everything shown or recorded goes through :func:`clipped`;
the full text is kept once, in one file, by whoever has one to keep it in. A value quoted
back in an error (an option's, say) goes through :func:`echo`, cut far shorter.
"""

from __future__ import annotations

from typing import Final

MESSAGE_LIMIT: Final = 2000
"""Characters of a foreign text (server error, traceback, echoed input) shown or recorded."""
ECHO_LIMIT: Final = 40
"""Characters of a value an error message quotes back (an option's value, a key's name)."""


def echo(value: object) -> str:
    """``value`` as a message quotes it back: quoted, whole up to :data:`ECHO_LIMIT`
    characters, else its first and last half of that around a ``…`` and its length (a
    path keeps its file name). Every option's error quotes its value through this, so a
    120 kB value costs the answer forty characters, once."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= ECHO_LIMIT:
        return repr(value) if isinstance(value, str) else text
    half = ECHO_LIMIT // 2
    return f"{text[:half] + '…' + text[-half:]!r} ({len(text)} characters)"


def mentioning(text: str, value: str) -> str:
    """A foreign text (an exception's, another check's) that may quote ``value``: where
    it does and ``value`` is longer than :data:`ECHO_LIMIT`, the quote becomes its echo."""
    if len(value) <= ECHO_LIMIT:
        return text
    return text.replace(repr(value), echo(value)).replace(value, echo(value))


def clipped(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text``, or its first ``limit`` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"
