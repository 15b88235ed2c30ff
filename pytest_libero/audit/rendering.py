"""Whether a recorded case's images can be checked here: same renderer, or not.

Image bytes are comparable under one renderer only. A record names the renderer that
drew its images (its fingerprint, ``identity.renderer``); verify measures this machine's
and compares the two. The same renderer: every image is compared and a mismatch stays a
mismatch. Another renderer: images are not compared, the rest (encoders, controls,
counters, outcome, files) is re-executed and checked, and a case whose rest agrees is
*not verifiable: renderer differs*, never a mismatch. A record written before
fingerprints existed is checked as before (images compared when the GL backend is the
same) and says that another renderer cannot be ruled out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pytest_libero.audit.compare import MISMATCH, NOT_VERIFIABLE, VERIFIED, Verdict
from pytest_libero.evidence.renderer import describe, same
from pytest_libero.protocol.parameters import CAMERAS
from pytest_libero.results.renderers import record_renderer

UNRECORDED_NOTE = ("the run recorded no renderer fingerprint (it predates them), so another "
                   "renderer cannot be ruled out as the cause")


@dataclass(frozen=True)
class Rendering:
    """What verify may compare for one case."""

    images: bool
    differs: str | None = None
    """``renderer differs (run: ..., here: ...)`` when the images are not comparable."""
    unrecorded: bool = False
    """The record names no renderer (a run from before fingerprints)."""


def rendering(record: Mapping[str, Any], here: Mapping[str, Any],
              backend: str | None) -> Rendering:
    """Compare the record's renderer with this machine's (``here``); for a record without
    one, only the GL backend can be compared (``backend``: how it differs, or None)."""
    recorded = record_renderer(record)
    if recorded is None:
        if backend is not None:
            return Rendering(False, f"renderer differs (run: not recorded, {backend}; "
                                    f"here: {describe(here)})", unrecorded=True)
        return Rendering(True, unrecorded=True)
    if same(recorded, here):
        return Rendering(True)
    return Rendering(False, f"renderer differs (run: {describe(recorded)}, here: {describe(here)})")


def judged(verdict: Verdict, seen: Rendering) -> Verdict:
    """The case's verdict once the renderer is taken into account."""
    if seen.differs is not None:
        if verdict.status == VERIFIED:
            return replace(verdict, status=NOT_VERIFIABLE,
                           reason=f"{seen.differs}; images not compared, the rest re-executed: "
                                  f"{verdict.reason}")
        if verdict.status == MISMATCH:
            return replace(verdict, reason=f"{verdict.reason}; this is not an image, so the "
                                           f"renderer does not explain it ({seen.differs})")
        return replace(verdict, reason=f"{verdict.reason}; {seen.differs}")
    if (seen.unrecorded and verdict.status == MISMATCH
            and (verdict.difference or {}).get("field") in CAMERAS):
        return replace(verdict, reason=f"{verdict.reason}; {UNRECORDED_NOTE}")
    return verdict
