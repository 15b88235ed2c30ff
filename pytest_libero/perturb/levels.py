"""Every registered kind's levels as one table, the identity it defines, and the option
that asks for kinds and levels.

A level fixes how large a change is; a generator seeded from the case id draws only its
directions (perturb/kind.py). The whole table, with what else each kind's draws depend
on, is hashed into the perturbed cases' identity (``libero-perturb-v1``), so changing a
magnitude changes what a result means. docs/perturbations.md prints the same table.
"""

from __future__ import annotations

from functools import cache

from pytest_libero.perturb import registry
from pytest_libero.perturb.kind import GENERATOR, LEVELS, PERTURB_SEED
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.identity import identity_with
from pytest_libero.protocol.text import echo

__all__ = ["GENERATOR", "LEVELS", "PERTURB_SEED", "level_table", "parse_perturbations",
           "perturb_identity", "table"]


def table() -> dict[str, dict[int, dict[str, float]]]:
    """Each registered kind's magnitudes at levels 1-4, in registration order."""
    return {kind.name: {level: dict(row) for level, row in kind.levels.items()}
            for kind in registry.kinds()}


def parse_perturbations(text: str) -> tuple[tuple[str, int], ...]:
    """``camera:2,noise:1`` or ``all`` -> ((kind, level), ...), in the registry's order."""
    kinds = registry.names()
    if text.strip() == "all":
        return tuple((kind, level) for kind in kinds for level in LEVELS)
    asked: set[tuple[str, int]] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        kind, sep, level = part.partition(":")
        if not sep or kind not in kinds or level not in {str(v) for v in LEVELS}:
            which = "it" if part == text.replace(" ", "") else echo(part)  # quoted once
            raise SetupError(
                f"--libero-perturb={echo(text)}: cannot read {which}; write KIND:LEVEL[,KIND:LEVEL...] "
                f"with KIND one of {', '.join(kinds)} and LEVEL 1-4, or all"
            )
        asked.add((kind, int(level)))
    if not asked:
        raise SetupError(f"--libero-perturb={echo(text)}: no KIND:LEVEL given")
    return tuple(p for p in ((k, v) for k in kinds for v in LEVELS) if p in asked)


def level_table() -> dict[str, object]:
    """What the perturbed identity hashes: the generator, the seed, each kind's levels and
    what else its draws depend on (redraw bounds, settling limits, frozen data)."""
    terms: dict[str, object] = {}
    for kind in registry.kinds():
        terms.update(kind.identity_terms())
    return {"generator": GENERATOR, "seed": PERTURB_SEED, **terms,
            "table": {name: {str(v): dict(p) for v, p in levels.items()}
                      for name, levels in table().items()}}


def perturb_identity(mode: str = "fast") -> str:
    """The identity of a case under a generated perturbation (``libero-perturb-v1:``): its
    mode's protocol payload plus the level table, so native identities never move
    because perturbations exist."""
    return _identity(mode, registry.version())


@cache
def _identity(mode: str, version: int) -> str:
    return identity_with("libero-perturb", {"perturbations": level_table()}, mode, "perturbed")
