"""``policy/lent.py``: the caller's own object's faults told in its terms (issue 61).

Unit tests of the wrapper with a stand-in client; the real path (evaluate() serving an
object that raises, over the websocket wire, in a real case) is in tests/test_evaluate.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from pytest_libero.policy.contract import Observation
from pytest_libero.policy.errors import ServerError
from pytest_libero.policy.lent import LentObjectRaised, LentPolicy, as_lent
from pytest_libero.policy.openpi.server import LENT_OBJECT, SERVER_KEY

TRACEBACK = 'Traceback (most recent call last):\n  File "policy.py", line 3\nRuntimeError: out of ideas\n'


class Client:
    def __init__(self, metadata: Mapping[str, Any]) -> None:
        self.metadata, self.last_call_s = metadata, 0.25

    def reset(self) -> None:
        pass

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        raise ServerError("the policy server at ws://127.0.0.1:1 raised while answering: RuntimeError",
                          traceback=TRACEBACK)

    def close(self) -> None:
        pass


def observed(calls_before: int) -> Observation:
    return Observation("pick it up", {"agentview": np.zeros((2, 2, 3), np.uint8)}, None, calls_before, 0)


def test_a_lent_object_s_error_names_the_object_and_the_call() -> None:
    policy = as_lent(Client({SERVER_KEY: {LENT_OBJECT: "lab.policies.Pi"}}))
    assert isinstance(policy, LentPolicy) and policy.last_call_s == 0.25  # the client's own attributes
    with pytest.raises(LentObjectRaised) as raised:
        policy.infer(observed(2))
    said = "your policy object (lab.policies.Pi) raised on call 3: RuntimeError: out of ideas"
    assert str(raised.value) == said
    assert raised.value.cause == "policy" and raised.value.traceback == TRACEBACK


@pytest.mark.parametrize("metadata", [
    {}, {SERVER_KEY: {"infer_batch": False}}, {SERVER_KEY: "lent"}, {SERVER_KEY: {LENT_OBJECT: 3}},
], ids=["none", "plain", "text", "number"])
def test_any_other_server_s_errors_stay_the_server_s(metadata: Mapping[str, Any]) -> None:
    client = Client(metadata)
    assert as_lent(client) is client
    with pytest.raises(ServerError, match="the policy server at ws://"):
        client.infer(observed(0))
