"""The one list of perturbation kinds, and what the rest of the package asks of them.

Selection, collection, the simulator side, verify and the reports loop over this
registry; none of them names a kind. The shipped kinds are registered at import; a kind
of your own is named by ``--libero-kind=module:Class``, which the run plan carries, so
every process that plans, runs or verifies its cases registers it (:func:`load`;
docs/architecture.md, "Adding a perturbation kind"). Registering or removing a kind
moves the perturbed identity, which hashes every kind's levels.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from importlib import import_module

from pytest_libero.catalog.case_id import KIND_PATTERN
from pytest_libero.catalog.entries import PARAPHRASE, Entry
from pytest_libero.perturb.kind import (
    LEVELS,
    Applied,
    Context,
    Kind,
    KindApplied,
    Moment,
    Perturbation,
    Stage,
    Unstaged,
)
from pytest_libero.perturb.kinds import BUILTIN
from pytest_libero.perturb.paraphrase import ParaphraseApplied
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped, echo, mentioning

_kinds: dict[str, Kind] = {kind.name: kind for kind in BUILTIN}
_loaded: dict[str, str] = {}
"""Kinds registered by :func:`load`: name -> the ``module:attribute`` it came from."""
_version = 0


def version() -> int:
    """Moves whenever the registry changes: a key for what is computed from it."""
    return _version


def _changed() -> None:
    global _version
    _version += 1
    _not_applicable.cache_clear()


def _problem(kind: Kind) -> str | None:
    name = getattr(kind, "name", None)
    if not isinstance(name, str) or not re.fullmatch(KIND_PATTERN, name):
        return f"its name {name!r} must match {KIND_PATTERN} (it becomes the case id's tag)"
    if name in _kinds:
        return "a kind of that name is registered already"
    levels = getattr(kind, "levels", None)
    if not isinstance(levels, Mapping) or tuple(sorted(levels)) != LEVELS or not all(
            isinstance(row, Mapping) and all(isinstance(v, float) for v in row.values())
            for row in levels.values()):
        return f"its levels must map each of {LEVELS} to {{name: float}} magnitudes"
    if not (isinstance(kind.applied, type) and issubclass(kind.applied, KindApplied)):
        return "its applied class must subclass perturb.kind.KindApplied"
    return None


def register(kind: Kind) -> None:
    """Add ``kind`` after the kinds registered so far, or refuse it with the reason."""
    problem = _problem(kind)
    if problem is not None:
        raise ValueError(f"cannot register perturbation kind {getattr(kind, 'name', kind)!r}: "
                         f"{problem}")
    _kinds[kind.name] = kind
    _changed()


def unregister(name: str) -> None:
    """Remove the kind ``name`` (a test's own kind, once it is done)."""
    del _kinds[name]
    _loaded.pop(name, None)
    _changed()


def load(spec: str) -> Kind:
    """Register the kind ``module:attribute`` names (a :class:`Kind` subclass or
    instance), once per process: loading it again is a no-op. Refused with the reason."""
    for name, source in _loaded.items():
        if source == spec:
            return _kinds[name]
    module, sep, attribute = spec.partition(":")
    if not sep or not module or not attribute:
        raise SetupError(f"--libero-kind={echo(spec)}: give module:Class, a perturbation "
                         "kind importable where the cases run (docs/architecture.md)")
    if module.startswith("."):
        raise SetupError(f"--libero-kind={echo(spec)}: {echo(module)} is a relative module "
                         "name; give the module's full dotted name")
    try:
        with own_code(f"--libero-kind={echo(spec)}: importing {echo(module)}", "; fix the module",
                      passes=(ImportError, AttributeError)):
            found = getattr(import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise SetupError(f"--libero-kind={echo(spec)}: cannot import it "
                         f"({mentioning(str(exc), module)}); give an "
                         "importable module:Class") from exc
    with own_code(f"--libero-kind={echo(spec)}: making the kind"):
        made = found() if isinstance(found, type) and issubclass(found, Kind) else found
    if not isinstance(made, Kind):
        raise SetupError(f"--libero-kind={echo(spec)} is a {type(found).__name__}, not a "
                         "pytest_libero.perturb.kind.Kind subclass or instance")
    try:
        with own_code(f"--libero-kind={echo(spec)}: reading its name and levels", passes=(ValueError,)):
            register(made)
    except ValueError as exc:
        raise SetupError(f"--libero-kind={echo(spec)}: {mentioning(str(exc), spec)}") from None
    _loaded[made.name] = spec
    return made


def raised(exc: BaseException) -> str:
    """What a kind of one's own raised, on one line: its type and (clipped) message."""
    return f"{type(exc).__name__}: {clipped(' '.join(str(exc).split()), 200)}"


@contextmanager
def own_code(what: str, then: str = "",
             passes: tuple[type[BaseException], ...] = (SetupError,)) -> Iterator[None]:
    """Run a kind's own code (its module, its class, its methods): what it raises, even
    SystemExit, becomes one line, ``<what> raised <Type>: <message><then>``, a
    :class:`SetupError` with no traceback; ``passes`` go on as they are (a SetupError is
    said already, in the words it needs)."""
    try:
        yield
    except passes:
        raise
    except (Exception, SystemExit) as exc:
        raise SetupError(f"{what} raised {raised(exc)}{then}") from None


def load_all(specs: Iterable[str]) -> None:
    """Register every kind a run plan names (a no-op for those registered already)."""
    for spec in specs:
        load(spec)


@contextmanager
def registered(kind: Kind) -> Iterator[Kind]:
    """``kind`` registered for the length of a ``with`` block."""
    register(kind)
    try:
        yield kind
    finally:
        unregister(kind.name)


def kinds() -> tuple[Kind, ...]:
    """Every registered kind, in registration order (the shipped ones first)."""
    return tuple(_kinds.values())


def names() -> tuple[str, ...]:
    return tuple(_kinds)


def kind(name: str) -> Kind:
    try:
        return _kinds[name]
    except KeyError:
        raise ValueError(f"no perturbation kind {name!r}; registered: {', '.join(_kinds)}") from None


def draw(name: str, level: int, case: str, attempt: int = 0,
         context: Context | None = None) -> Perturbation:
    """The perturbation of ``case`` (the unperturbed case's id) by kind ``name`` at ``level``."""
    return kind(name).draw(level, case, attempt, context)


def worded(entry: Entry) -> Entry:
    """The instruction moment: ``entry`` with the words its kind sends, if it sends its own."""
    perturbation = entry.perturbation
    if perturbation is None:
        return entry
    with own_code(f"perturbation kind {perturbation.kind!r}: its instruction()", f" for {entry.case_id}"):
        words = kind(perturbation.kind).instruction(str(entry.twin), perturbation.level)
    if words is not None and not isinstance(words, str):
        raise SetupError(f"perturbation kind {perturbation.kind!r}: its instruction() gave "
                         f"{echo(words)} for {entry.case_id}, a {type(words).__name__}; it must "
                         "return the instruction's text, or None to keep the task's own")
    return entry if words is None else entry.reworded(words)


def perturbed(entry: Entry, name: str, level: int) -> Entry:
    """``entry`` under kind ``name`` at ``level``, as selection makes it."""
    return worded(entry.perturbed(name, level))


def not_applicable(entry: Entry) -> str | None:
    """Why ``entry``'s generated perturbation cannot apply to its task (None: it can, or
    the entry is not perturbed). One answer per task, kind and level: a full-mode
    selection asks once per state."""
    perturbation = entry.perturbation
    if perturbation is None:
        return None
    return _not_applicable(replace(entry, state=None), perturbation.kind, perturbation.level)


@cache
def _not_applicable(entry: Entry, name: str, level: int) -> str | None:
    with own_code(f"perturbation kind {name!r}: its not_applicable()", f" for {entry.case_id}"):
        found = kind(name).not_applicable(entry, level)
    if found is not None and not isinstance(found, str):
        raise SetupError(f"perturbation kind {name!r}: its not_applicable() gave {echo(found)} for "
                         f"{entry.case_id}; it must return None or the reason, as text")
    return found


def unproven(entry: Entry, recorded: object) -> str | None:
    """Why ``recorded`` (a case's ``perturbation`` block) does not prove that ``entry``'s
    perturbation was applied; None when it does, or the case has none to prove. Only
    what acts at run time proves itself so: a generated kind and a paraphrase companion
    (a LIBERO-PRO entry's files are its perturbation, hashed in its identity)."""
    if entry.perturbation is not None:
        expected = (entry.perturbation.kind, entry.perturbation.level)
    elif entry.ood is not None and entry.ood.kind == PARAPHRASE:
        expected = (PARAPHRASE, 1)
    else:
        return None
    what = f"{entry.case_id} is a {expected[0]} level {expected[1]} case"
    if not isinstance(recorded, Mapping):
        return f"{what}, but nothing records the perturbation applied"
    found = (recorded.get("kind"), recorded.get("level"))
    if found != expected:
        return f"{what}, but its record says {str(found[0])[:40]!r} level {str(found[1])[:10]}"
    return None


def applying(entry: Entry, stage: Stage) -> Applied:
    """What acts on the episode ``stage`` sets up for ``entry``: its kind's work, a
    paraphrase companion's record, or nothing (a native or LIBERO-PRO case)."""
    perturbation = entry.perturbation
    if perturbation is not None:
        return kind(perturbation.kind).on(stage, perturbation.level)
    if entry.ood is not None and entry.ood.kind == PARAPHRASE:
        return ParaphraseApplied(stage)
    return Applied(stage)


def delay_rule(entry: Entry) -> Callable[[int, float], int] | str:
    """How ``entry``'s perturbation delays each reply (``Applied.delay``), asked of its kind
    with no simulator behind it, for reading a record (verify, export): a function of the
    call and its latency, or why it cannot be asked. A case whose kind does not act on
    the controls, or that has no kind, answers every reply at once (0)."""
    perturbation = entry.perturbation
    if perturbation is None:
        return _at_once
    try:
        found = kind(perturbation.kind)
    except ValueError:
        return (f"its perturbation kind {perturbation.kind!r} is not registered here: name it "
                "with --libero-kind=module:Class as the run did")
    if Moment.CONTROL not in found.moments():
        return _at_once
    try:
        applied = found.on(Unstaged(entry), perturbation.level)
    except (Exception, SystemExit) as exc:
        return (f"perturbation kind {perturbation.kind!r} cannot say its delays without a "
                f"simulator ({raised(exc)})")

    def delay(call: int, latency_s: float) -> int:
        return applied.delay(call, latency_s)
    return delay


def _at_once(call: int, latency_s: float) -> int:
    return 0
