"""pytest-libero: natively scored LIBERO episodes as pytest cases.

``from pytest_libero import evaluate`` runs the suite on a policy from Python (a training
loop); it is imported on first use, so importing the plugin stays light.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
PYTHONS = ((3, 11), (3, 12))
"""The Pythons pytest-libero runs on: requires-python's range (mujoco 3.2.3 has wheels for
these only; the code needs 3.11's tomllib). A test holds the two together."""


def unsupported_python() -> str | None:
    """One line saying this Python cannot run pytest-libero and what to do; None when it can.

    pip refuses another Python at install; uv installs anyway (it ignores an upper bound on
    requires-python), without the simulator stack, so the plugin, the command and
    ``evaluate`` say this instead of failing on a missing simulator.
    """
    here = sys.version_info[:2]
    if here in PYTHONS:
        return None
    names = " and ".join(".".join(map(str, p)) for p in PYTHONS)
    return (f"pytest-libero runs on Python {names} (its pinned MuJoCo 3.2.3 has wheels for those "
            f"only), and this is Python {here[0]}.{here[1]}: make the environment with one of them, "
            f"e.g. `uv venv --python {PYTHONS[-1][0]}.{PYTHONS[-1][1]}`")

if TYPE_CHECKING:
    from pytest_libero.api.evaluate import (
        EvaluationFailed,
        EvaluationInterrupted,
        EvaluationRefused,
        evaluate,
    )
    from pytest_libero.api.evaluation import Evaluation

_LAZY = {**dict.fromkeys(("evaluate", "EvaluationRefused", "EvaluationFailed", "EvaluationInterrupted"),
                         "pytest_libero.api.evaluate"),
         "Evaluation": "pytest_libero.api.evaluation"}
__all__ = ["Evaluation", "EvaluationFailed", "EvaluationInterrupted", "EvaluationRefused", "__version__",
           "evaluate"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        problem = unsupported_python()
        if problem is not None:
            raise ImportError(problem)

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pytest_libero' has no attribute {name!r}")
