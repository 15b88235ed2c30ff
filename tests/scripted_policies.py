"""In-process policies for tests that need a run with a short case and a long one.

Importable by child processes and subprocess pytest runs: put this folder on
PYTHONPATH (see ``TESTS_DIR``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

TESTS_DIR = Path(__file__).resolve().parent


class QuickThenSlow:
    """Stops at once on libero_10-00 ("alphabet soup"); holds still for the whole cap on
    every other task, unless the environment variable FAST is set (a resumed run)."""

    metadata: Mapping[str, Any] = {"policy": "quick-then-slow"}

    def reset(self) -> None:
        pass

    def infer(self, observation: Any) -> Mapping[str, Any]:
        if "alphabet soup" in observation.language or os.environ.get("FAST"):
            return {"stop": True}
        return {"actions": np.array([[0, 0, 0, 0, 0, 0, -1.0]])}

    def close(self) -> None:
        pass


QUICK_THEN_SLOW_PROFILE = """
name = "zero"
[policy]
factory = "scripted_policies:QuickThenSlow"
[stop]
consecutive = 1
"""
