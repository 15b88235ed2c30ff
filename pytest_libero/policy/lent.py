"""A case's policy that is the caller's own object, lent by ``evaluate()``: its faults in its terms.

``evaluate()`` serves the caller's object over the websocket wire from the caller's
process, so what the object raises reaches the case as a server's error frame. Told as
that ("the policy server at ws://127.0.0.1:43367 raised ...") it reads as a transport
fault the user never set up; :func:`as_lent` wraps the case's client so it says instead
which object raised what on which call, the cause an in-process policy's error has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pytest_libero.policy.contract import Observation, Policy
from pytest_libero.policy.errors import ServerError
from pytest_libero.policy.openpi.server import LENT_OBJECT, SERVER_KEY


class LentObjectRaised(ServerError):
    """The caller's own policy object raised; ``traceback`` holds its traceback."""

    cause: ClassVar[str] = "policy"


class LentPolicy:
    """The case's client for a lent object; the observation's counter names the call."""

    def __init__(self, client: Policy, object_name: str) -> None:
        self.client, self.object_name = client, object_name
        self.metadata: Mapping[str, Any] = client.metadata

    def reset(self) -> None:
        self.client.reset()

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        try:
            return self.client.infer(observation)
        except LentObjectRaised:
            raise
        except ServerError as exc:
            told = exc.traceback.rstrip().splitlines()
            raised = told[-1].strip() if told else str(exc)  # the exception's own line
            call = observation.policy_calls + 1
            raise LentObjectRaised(f"your policy object ({self.object_name}) raised on call {call}: {raised}",
                                   traceback=exc.traceback) from exc

    def close(self) -> None:
        self.client.close()

    def __getattr__(self, name: str) -> Any:  # the client's other attributes (timings, layout)
        return getattr(self.client, name)


def as_lent(policy: Policy) -> Policy:
    """``policy`` itself, unless its server says it serves the caller's own object."""
    served = policy.metadata.get(SERVER_KEY)
    name = served.get(LENT_OBJECT) if isinstance(served, Mapping) else None
    if not isinstance(name, str) or isinstance(policy, LentPolicy):
        return policy
    return LentPolicy(policy, name)
