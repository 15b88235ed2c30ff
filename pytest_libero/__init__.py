"""pytest-libero: natively scored LIBERO episodes as pytest cases.

``from pytest_libero import evaluate`` runs the suite on a policy from Python (a training
loop); it is imported on first use, so importing the plugin stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from pytest_libero.inloop.evaluate import (
        EvaluationFailed,
        EvaluationInterrupted,
        EvaluationRefused,
        evaluate,
    )
    from pytest_libero.inloop.evaluation import Evaluation

_LAZY = {**dict.fromkeys(("evaluate", "EvaluationRefused", "EvaluationFailed", "EvaluationInterrupted"),
                         "pytest_libero.inloop.evaluate"),
         "Evaluation": "pytest_libero.inloop.evaluation"}
__all__ = ["Evaluation", "EvaluationFailed", "EvaluationInterrupted", "EvaluationRefused", "__version__",
           "evaluate"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pytest_libero' has no attribute {name!r}")
