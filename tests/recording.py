"""A recording in-process policy for simulator tests: it logs what each call was shown
(the observation's fields, the instruction, the images' shapes) and answers from a
script, so a test can assert what the policy side of the contract saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.runs import run_folder, run_records

RECORDING_POLICY = '''
import dataclasses, json
from pathlib import Path
import numpy as np

HOLD = [0, 0, 0, 0, 0, 0, -1.0]


class Recording:
    """Replies from a script keyed by call number and records what it was shown."""

    def __init__(self, log, script="", dump=""):
        self.log = Path(log)
        self.script = json.loads(script) if script else {}
        self.dump = dump
        self.metadata = {"policy": "recording"}
        self.call = 0

    def reset(self):
        self.call = 0

    def infer(self, obs):
        self.call += 1
        entry = {
            "call": self.call,
            "fields": sorted(f.name for f in dataclasses.fields(obs)),
            "language": obs.language,
            "images": {k: [list(v.shape), str(v.dtype), bool(v.flags.c_contiguous)]
                       for k, v in obs.images.items()},
            "proprio": None if obs.proprio is None else obs.proprio.tolist(),
            "policy_calls": obs.policy_calls,
            "executed_controls": obs.executed_controls,
        }
        with self.log.open("a") as stream:
            stream.write(json.dumps(entry) + "\\n")
        if self.dump and self.call == 1:
            np.savez(self.dump, proprio=obs.proprio if obs.proprio is not None else np.zeros(0), **obs.images)
        step = self.script.get(str(self.call), 1)
        if step == "stop":
            return {"stop": True}
        if step == "nan-if-soup" and "alphabet soup" in obs.language:
            return {"actions": np.full((2, 7), np.nan)}
        n = int(step) if isinstance(step, int) else 1
        return {"actions": np.tile(HOLD, (n, 1))}

    def close(self):
        pass
'''


def write_profile(pytester: pytest.Pytester, *, track: str = "rgb", options: str = "") -> Path:
    pytester.makepyfile(recording_policy=RECORDING_POLICY)
    pytester.syspathinsert()
    return pytester.makefile(".toml", profile=f'''
        name = "recording"
        track = "{track}"
        [policy]
        factory = "recording_policy:Recording"
        options = {{ log = "{pytester.path / 'calls.jsonl'}"{options} }}
    ''')


def records(pytester: pytest.Pytester, profile: str) -> list[dict[str, Any]]:
    return run_records(run_folder(pytester.path / "libero-results", profile))


def calls(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (pytester.path / "calls.jsonl").read_text().splitlines()]
