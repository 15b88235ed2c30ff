"""Why a case errored, classified (P11): environment, policy transport, invalid action.

Each class carries a short ``kind`` that lands in the record, so a reader can count
errors by cause without parsing messages.
"""

from __future__ import annotations

from typing import ClassVar


class EpisodeError(Exception):
    """A case could not complete; it is errored, never retried."""

    kind: ClassVar[str] = "error"
    cause: ClassVar[str] = "error"


class EnvironmentFault(EpisodeError):
    """The simulator failed to build, reset, step or score."""

    kind = "environment"
    cause = "environment"


class PerturbationNotApplied(EnvironmentFault):
    """The case is perturbed, but its episode does not record the perturbation applied
    (an adapter that ignores it would run the twin again under the perturbed name)."""

    cause = "perturbation_not_applied"


class PolicyTransportError(EpisodeError):
    """The policy could not be reached, or its reply could not be read."""

    kind = "policy_transport"
    cause = "policy"


class InvalidAction(EpisodeError):
    """The policy answered, but the answer breaks the action contract (P6)."""

    kind = "invalid_action"
    cause = "invalid_action"


class SetupError(Exception):
    """A usage problem found before any case runs: bad options, profile or install."""
