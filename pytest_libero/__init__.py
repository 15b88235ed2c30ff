"""pytest-libero: natively scored LIBERO episodes as pytest cases.

The public surface is what this module exports (``__all__``), the hooks of
:mod:`pytest_libero.hookspecs`, ``python -m pytest_libero.serve``, the ``pytest-libero``
command, the options and the record (docs/records.md); every other module path is the
package's own and may change (docs/architecture.md, "The public surface"). Here:
``evaluate`` and what it returns or raises (the suite on a policy object, from a training
loop), the policy contract a served or lent policy meets (``Policy``, ``BatchPolicy``,
``EpisodeAware``, ``Observation``, ``Reply``), a perturbation kind of your own (``Kind``, ``KindApplied``,
``Perturbation``, ``Context``, ``Magnitudes``), a simulator adapter of your own
(``BenchmarkAdapter``, ``Episode``) and the typed record listeners get (``CaseRecord``).
Each is imported on first use, so importing the plugin stays light.
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
    from pytest_libero.adapters.base import BenchmarkAdapter, Episode
    from pytest_libero.api.evaluate import (
        EvaluationFailed,
        EvaluationInterrupted,
        EvaluationRefused,
        evaluate,
    )
    from pytest_libero.api.evaluation import Evaluation
    from pytest_libero.episode.record import CaseRecord
    from pytest_libero.perturb.kind import Context, Kind, KindApplied, Magnitudes, Perturbation
    from pytest_libero.policy.contract import BatchPolicy, EpisodeAware, Observation, Policy, Reply

_HOMES = {
    "pytest_libero.api.evaluate": ("evaluate", "EvaluationRefused", "EvaluationFailed",
                                   "EvaluationInterrupted"),
    "pytest_libero.api.evaluation": ("Evaluation",),
    "pytest_libero.policy.contract": ("Policy", "BatchPolicy", "EpisodeAware", "Observation",
                                      "Reply"),
    "pytest_libero.perturb.kind": ("Kind", "KindApplied", "Perturbation", "Context", "Magnitudes"),
    "pytest_libero.adapters.base": ("BenchmarkAdapter", "Episode"),
    "pytest_libero.episode.record": ("CaseRecord",),
}
"""Where each public name is defined: it is imported from there on first use (importing
the plugin stays light), and that path keeps working too."""
_LAZY = {name: module for module, names in _HOMES.items() for name in names}
__all__ = [
    "BatchPolicy", "BenchmarkAdapter", "CaseRecord", "Context", "Episode", "EpisodeAware",
    "Evaluation",
    "EvaluationFailed", "EvaluationInterrupted", "EvaluationRefused", "Kind", "KindApplied",
    "Magnitudes", "Observation", "Perturbation", "Policy", "Reply", "__version__", "evaluate",
    "unsupported_python",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        problem = unsupported_python()
        if problem is not None:
            raise ImportError(problem)

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pytest_libero' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
