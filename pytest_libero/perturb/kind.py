"""What a perturbation kind is: one object that owns its levels, its draw, where it
applies, the moments it acts at and what it records.

A :class:`Kind` is registered once (perturb/registry.py) and is all the rest of the
package knows of it: selection asks it for the instruction a case sends, collection
whether it applies to a task, the simulator side for the :class:`Applied` that acts on
one episode at each :class:`Moment`. Nothing outside ``perturb/`` names a kind.

The draw is seeded from the unperturbed case id with the kind and level (:func:`seed_of`),
so a case applies the same perturbation on every machine, and the record keeps what was
drawn for ``pytest-libero verify`` to draw again and compare.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

import numpy as np

if TYPE_CHECKING:
    from pytest_libero.catalog.entries import Entry

GENERATOR: Final = "pytest-libero-perturb/1"
"""The drawing code's version: raise it whenever a draw would come out differently.
Adding a kind does not: the existing kinds' draws stay byte-identical (old runs still
verify), and the perturbed identity moves anyway, since it hashes every kind's levels."""
PERTURB_SEED: Final = 20261201
"""The one documented seed every draw starts from, with the case id, kind and level."""
LEVELS: Final = (1, 2, 3, 4)

Magnitudes = Mapping[str, float]
"""One level's row of a kind's table: the size of each change."""
Context = Mapping[str, Sequence[str]]
"""What a draw needs from the built scene, as sorted names (the position kind's movable
objects, the environment kind's installed objects and textures); empty for most kinds."""


class Moment(enum.Enum):
    """When a kind acts on a case, in the order a case meets them."""

    INSTRUCTION = "instruction"
    """At selection: the words the case sends (:meth:`Kind.instruction`)."""
    SCENE = "scene"
    """After the episode's reset, on the compiled model (a hard reset recompiles it)."""
    INIT_STATE = "init_state"
    """After the released init state is installed, before the settling controls."""
    PLACEMENT = "placement"
    """Objects moved or added with the init state, judged once settled, drawn again when
    rejected (perturb/settling.py)."""
    SETTLED = "settled"
    """Once settled, before the first observation."""
    DELIVERY = "delivery"
    """On every observation delivered to the policy; the simulator is untouched."""
    CONTROL = "control"
    """In the control loop: when each reply becomes usable (protocol/clock.py)."""


HOOKS: Final[Mapping[Moment, tuple[str, ...]]] = {
    Moment.SCENE: ("on_scene", "install"),
    Moment.INIT_STATE: ("on_init_state",),
    Moment.PLACEMENT: ("set_up",),
    Moment.SETTLED: ("on_settled",),
    Moment.DELIVERY: ("deliver",),
    Moment.CONTROL: ("delay",),
}
"""The :class:`Applied` methods that act at each simulator moment."""


@dataclass(frozen=True)
class Perturbation:
    """One drawn perturbation, as the record keeps it."""

    kind: str
    level: int
    parameters: dict[str, Any]
    seed: int
    attempt: int = 0
    """How many draws were rejected and drawn again (robot, position, environment)."""
    generator: str = GENERATOR

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "level": self.level, "parameters": self.parameters,
                "seed": self.seed, "generator": self.generator, "redraws": self.attempt}


def seed_of(*parts: object) -> int:
    """A 64-bit seed from the parts' text: the same on every machine and Python."""
    text = ":".join(str(p) for p in (GENERATOR, PERTURB_SEED, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def generator(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


class Stage(Protocol):
    """What the simulator side offers a kind while it sets one episode up."""

    @property
    def entry(self) -> Entry:
        """The case being set up: its id names a refusal, its twin seeds every draw."""

    @property
    def env(self) -> Any:
        """LIBERO's environment (``OffScreenRenderEnv``): ``sim``, and ``env``, robosuite's."""

    def install(self, state: np.ndarray) -> None:
        """Install the released init state (through :meth:`Applied.install`)."""

    def settle(self) -> None:
        """Run the settling controls (P4); the last one's images are the first observation."""


@dataclass(frozen=True)
class Unstaged:
    """A stage with no simulator behind it: what a kind's rules are asked of while a
    record is read (its replies' delays, say). Anything that needs the scene raises."""

    entry: Entry

    @property
    def env(self) -> Any:
        raise RuntimeError("no simulator here: the record is being read, not run")

    def install(self, state: np.ndarray) -> None:
        raise RuntimeError("no simulator here: the record is being read, not run")

    def settle(self) -> None:
        raise RuntimeError("no simulator here: the record is being read, not run")


class Applied:
    """A perturbation's work on one episode (none at all: a native case).

    The simulator side calls every hook at its moment, for every case; a kind overrides
    those it acts at (:data:`HOOKS`). ``record`` is what the case's record keeps under
    ``perturbation`` (None: nothing).
    """

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.record: dict[str, Any] | None = None

    def on_scene(self) -> None:
        """After the episode's reset: change the compiled model."""

    def install(self, state: np.ndarray) -> Any | None:
        """Install the init state on a model this kind changed; None: LIBERO's own."""
        return None

    def on_init_state(self) -> None:
        """After the init state is installed, before settling."""

    def set_up(self, state: np.ndarray) -> None:
        """From the reset scene to the settled one: install, then settle."""
        self.stage.install(state)
        self.on_init_state()
        self.stage.settle()

    def on_settled(self) -> None:
        """Settled, before the first observation."""

    def deliver(self, images: dict[str, np.ndarray], policy_call: int) -> dict[str, np.ndarray]:
        """The images the policy is given at ``policy_call`` (the simulator's own are untouched)."""
        return images

    def delay(self, policy_call: int, latency_s: float) -> int:
        """How many controls after it was sent ``policy_call``'s reply becomes usable
        (0: at once, the synchronous protocol); ``latency_s`` is what the call took."""
        return 0


class KindApplied(Applied):
    """A generated kind's work on one episode, at one level."""

    def __init__(self, kind: Kind, level: int, stage: Stage) -> None:
        super().__init__(stage)
        self.kind = kind
        self.level = level

    @property
    def twin(self) -> str:
        """The unperturbed case's id: what every draw of this case is seeded by."""
        return str(self.stage.entry.twin)

    def draw(self, attempt: int = 0, context: Context | None = None) -> Perturbation:
        return self.kind.draw(self.level, self.twin, attempt, context)


class Kind:
    """One generated perturbation kind. Subclasses set the class attributes, the draw
    (:meth:`parameters`) and the :class:`Applied` class that acts on an episode; the rest
    has defaults: a kind applies to every task and leaves the instruction alone."""

    name: ClassVar[str]
    """The kind's name: the option's ``KIND`` and the case id's tag (``~camera2``)."""
    levels: ClassVar[Mapping[int, Magnitudes]]
    """The magnitudes of levels 1-4, hashed into the perturbed identity."""
    applied: ClassVar[type[KindApplied]] = KindApplied
    """What acts on an episode; its overridden hooks are the kind's moments."""

    def parameters(self, rng: np.random.Generator, first: np.random.Generator,
                   magnitudes: Magnitudes, context: Context) -> dict[str, Any]:
        """The drawn parameters: ``rng`` is this attempt's generator, ``first`` the first
        attempt's (for what is drawn once per case), ``context`` the scene's names."""
        return {}

    def draw(self, level: int, case: str, attempt: int = 0,
             context: Context | None = None) -> Perturbation:
        """The perturbation of ``case`` (the unperturbed case's id) at ``level``."""
        seed = seed_of(case, self.name, level, attempt)
        first = generator(seed_of(case, self.name, level, 0))
        drawn = self.parameters(generator(seed), first, self.levels[level], context or {})
        parameters = {k: float(v) if isinstance(v, np.floating) else v for k, v in drawn.items()}
        return Perturbation(self.name, level, parameters, seed, attempt)

    def identity_terms(self) -> dict[str, Any]:
        """What else this kind's draws depend on besides its levels (bounds, frozen data),
        hashed into the perturbed identity beside the table."""
        return {}

    def not_applicable(self, entry: Entry, level: int) -> str | None:
        """Why this kind at ``level`` cannot perturb ``entry``'s task (None: it can). Known
        at collection, so such a case is skipped with the reason, never run unperturbed."""
        return None

    def instruction(self, twin: str, level: int) -> str | None:
        """The instruction a case of this kind sends instead of its twin's (None: the twin's)."""
        return None

    def moments(self) -> tuple[Moment, ...]:
        """When this kind acts, read off what it overrides."""
        found = [Moment.INSTRUCTION] if type(self).instruction is not Kind.instruction else []
        found += [moment for moment, hooks in HOOKS.items()
                  if any(getattr(self.applied, h) is not getattr(Applied, h) for h in hooks)]
        return tuple(found)

    def on(self, stage: Stage, level: int) -> KindApplied:
        """This kind's work on the episode ``stage`` sets up."""
        return self.applied(self, level, stage)
