"""A vla-eval model server for the tests: vla-eval's own ``PredictModelServer`` started by its
own ``run_server`` entry point, around a small numpy ``predict``.

    python tests/vla_eval_server.py --address 127.0.0.1:PORT [--args.mode=chunk] ...

``predict`` answers one 7-vector made from what it was sent (so a reply belongs to its
observation), and reports what vla-eval decoded under ``seen``: the image digests, the
instruction, the state, the payload's keys and the episode's task. Modes: ``echo``
(the default), ``chunk`` (a (4, 7) chunk, which vla-eval's LIBERO cannot execute),
``fail`` (predict raises), ``zero`` (zeros, nothing looked at: the benchmark's server),
``keeps_state`` (counts a connection's calls into its replies and never resets the count
at an episode start: a server check-server must catch).
``log``: a file that gets each ``seen`` as a JSON line (a
real case drops the reply's extras).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
from vla_eval.model_servers.base import SessionContext
from vla_eval.model_servers.predict import PredictModelServer
from vla_eval.model_servers.serve import run_server


def digest(image: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest()


def action_for(agentview: np.ndarray) -> np.ndarray:
    """The reply's vector: its first value the image's mean brightness, its gripper -0.25."""
    action = np.zeros(7, dtype=np.float32)
    action[0] = float(agentview.mean()) / 255.0
    action[6] = -0.25
    return action


class ProbeServer(PredictModelServer):
    def __init__(self, mode: str = "echo", wrist: bool = False, state: bool = False,
                 absolute: bool = False, log: str = "") -> None:
        super().__init__()
        self.mode = mode
        self.log = log
        self.params = {"send_wrist_image": wrist, "send_state": state,
                       **({"absolute_action": True} if absolute else {})}
        self.tasks: dict[str, Any] = {}
        self.calls: dict[str, int] = {}

    def get_observation_params(self) -> dict[str, Any]:
        return self.params

    async def on_episode_start(self, config: dict[str, Any], ctx: SessionContext) -> None:
        self.tasks[ctx.episode_id] = config.get("task")
        await super().on_episode_start(config, ctx)

    def predict(self, obs: dict[str, Any], ctx: SessionContext) -> dict[str, Any]:
        if self.mode == "fail":
            raise RuntimeError("the probe model failed on purpose")
        if self.mode == "zero":
            return {"actions": np.zeros(7, dtype=np.float32)}
        images = obs["images"]
        agentview = images["agentview"]
        if agentview.dtype != np.uint8 or agentview.shape != (256, 256, 3):
            raise ValueError(f"agentview is {agentview.dtype} {agentview.shape}, not uint8 256x256x3")
        seen = {"keys": sorted(obs), "images": {k: digest(v) for k, v in images.items()},
                "shapes": {k: list(v.shape) for k, v in images.items()},
                "task_description": obs["task_description"], "step": ctx.step,
                "task": self.tasks.get(ctx.episode_id)}
        for key in ("states", "controller_states"):
            if key in obs:
                seen[key] = {"dtype": obs[key].dtype.str, "values": obs[key].tolist()}
        if self.log:
            with open(self.log, "a", encoding="utf-8") as out:
                out.write(json.dumps(seen) + "\n")
        action = action_for(agentview)
        if self.mode == "keeps_state":
            self.calls[ctx.session_id] = self.calls.get(ctx.session_id, 0) + 1
            action[1] = self.calls[ctx.session_id] / 1000
        if self.mode == "chunk":
            return {"actions": np.stack([action] * 4), "seen": seen}
        return {"actions": action, "seen": seen}


if __name__ == "__main__":
    run_server(ProbeServer)
