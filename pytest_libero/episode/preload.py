"""Imported by each worker's forkserver: the simulator's modules, loaded once per worker.

Every case process is forked from that server (``isolation.py``), so
it starts with robosuite, LIBERO and MuJoCo imported instead of paying seconds per case
to import them. Nothing is built here (no environment, no GL context): each case still
builds its own, in its own process. An import that fails here is left for the case to
meet: the case imports the same modules again and records the error itself.
"""

from __future__ import annotations

import warnings
from contextlib import suppress

from pytest_libero.adapters.libero import prepare_simulator_environment

prepare_simulator_environment()
with suppress(Exception), warnings.catch_warnings():
    # robosuite calls a deprecated logging method at import time.
    warnings.simplefilter("ignore", DeprecationWarning)
    import libero.libero.envs  # noqa: F401

    import pytest_libero.episode.case  # noqa: F401
    import pytest_libero.evidence.writer  # noqa: F401
