"""Shared helpers for the bench/ scripts. Not part of the package; not imported by it.
What the tests and the release tools also use (a served policy, pytest runs and their
records, process trees, the bare env's render gates, the printed tables) lives in
harness/, and is reached from here.

Every benchmark here compares variants measured side by side in one run: the variants
are interleaved (the order rotates each repeat), and medians are reported with the
ratio. Absolute times depend on the machine and on whatever else runs on it; ratios
measured this way are what the documented targets refer to.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing; harness/ is there too
    sys.path.insert(0, str(ROOT))

from harness import proctree  # noqa: E402
from harness.native import CameraGate, catalog_entry, prepare_simulator  # noqa: E402
from harness.printing import machine_note, print_table  # noqa: E402
from harness.runs import all_records, run_pytest  # noqa: E402
from harness.servers import free_port, serve_argv, serving  # noqa: E402

__all__ = [  # the shared helpers bench scripts reach as c.NAME, besides this module's own
    "CameraGate", "catalog_entry", "free_port", "machine_note", "prepare_simulator", "print_table",
]


# ----------------------------------------------------------------------- reporting


def cpu_seconds() -> float:
    """CPU time of this process (all its threads, the renderer's included) plus that of
    its reaped children (the evidence encoders). Less sensitive to other jobs than wall
    time; a server in another process is not counted."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def p90(values: Sequence[float]) -> float:
    if not values:
        return math.nan
    if len(values) < 2:
        return float(values[0])
    return float(statistics.quantiles(values, n=10, method="inclusive")[-1])


def ratio_line(name: str, num: float, den: float, target: str | None = None) -> str:
    value = num / den if den else math.nan
    line = f"{name} = {value:.3f}"
    if target:
        line += f"   (target {target})"
    return line


def interleaved_order(names: Sequence[str], repeat: int) -> list[str]:
    """Rotate the order each repeat so no variant always runs first (or last)."""
    shift = repeat % len(names)
    order = list(names[shift:]) + list(names[:shift])
    return order


def episode_arguments(parser: Any) -> None:
    """The case and budget flags every episode benchmark shares."""
    parser.add_argument("--suite", default="libero_10")
    parser.add_argument("--task", type=int, default=0)
    parser.add_argument("--controls", type=int, default=40, help="N controls (a multiple of K)")
    parser.add_argument("--replan-interval", "-k", type=int, default=5, help="K")
    parser.add_argument("--repeats", type=int, default=3)


# ---------------------------------------------------------------------- the server


@contextlib.contextmanager
def zero_server(chunk: int = 5, *, wait_s: float = 60.0) -> Iterator[str]:
    """``python -m pytest_libero.serve --policy zero`` on 127.0.0.1; yields its ws:// URI."""
    port = free_port()
    argv = serve_argv("zero", port, options=[f"chunk={chunk}"], flags=["--host", "127.0.0.1"])
    with serving(argv, port, wait_s=wait_s, cwd=ROOT) as served:
        yield served.uri


# ------------------------------------------------------------- whole pytest runs


def timed_pytest(args: Sequence[str], label: str, *, expected: int | None = None,
                 env: dict[str, str] | None = None,
                 keep: Callable[[Path], Any] | None = None) -> dict[str, Any]:
    """One whole ``python -m pytest ARGS`` in a scratch folder, timed start to exit.

    Returns the wall time, the number of cases and the median per case of the plugin's
    own timings (setup + episode); with ``keep``, also what it makes of the results root
    (``kept``) before the scratch folder goes. Exits naming ``label`` when a case errored
    or cases are missing (``expected``: how many there must be; at least one in any case).
    """
    work = Path(tempfile.mkdtemp(prefix="bench-run-"))
    results = work / "results"
    try:
        t0 = time.perf_counter()
        done = run_pytest([*args, f"--libero-results={results}"], work, env=env)
        wall = time.perf_counter() - t0
        records = all_records(results)
        errored = [r for r in records if r["outcome"] == "errored"]
        if not records or errored or (expected is not None and len(records) != expected):
            counted = f"{len(records)} records" + ("" if expected is None else f" of {expected}")
            first = f" (the first: {errored[0]['summary']})" if errored else ""
            raise SystemExit(f"{label}: {counted}, {len(errored)} errored{first}, exit "
                             f"{done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        per_case = [sum(float(r.get("timings", {}).get(k, 0.0)) for k in ("setup_s", "episode_s"))
                    for r in records]
        return {"wall_s": wall, "cases": len(records), "per_case_s": median(per_case),
                "exit": done.returncode, **({"kept": keep(results)} if keep else {})}
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------- plans and cases


def websocket_profile(endpoint: str, folder: Path) -> Any:
    """A websocket profile (default openpi LIBERO request keys) pointing at ``endpoint``."""
    from pytest_libero.config.profiles import load_profile

    path = Path(folder) / "bench-websocket.toml"
    path.write_text(
        'name = "bench-websocket"\n'
        'description = "bench: the zero policy behind python -m pytest_libero.serve"\n'
        "infrastructure = true\n"
        'track = "rgb"\n'
        "[policy]\n"
        'transport = "websocket"\n'
        f'endpoint = "{endpoint}"\n'
        "connect_timeout = 10.0\n"
        "call_timeout = 60.0\n"
        "wait_s = 30.0\n"
        "[stop]\n"
        "consecutive = 0\n"
    )
    return load_profile(str(path))


def inprocess_zero_profile(chunk: int) -> Any:
    from pytest_libero.config.profiles import load_profile

    return load_profile("zero").with_overrides(options={"chunk": chunk})


def plan_for(profile: Any, case: Any, controls: int, replan_interval: int, *,
             render: str | None = None, video_stride: int | None = None,
             full_states: Sequence[int] | None = None) -> Any:
    """A decisions-budget plan for one entry: ceil(controls / K) calls of K controls.

    ``render`` / ``video_stride``: the plugin's --libero-render / --libero-video-stride
    (None: the plugin's defaults). ``full_states``: a full-mode plan over these states.
    """
    from pytest_libero.catalog.selection import SelectionRequest
    from pytest_libero.config.options import DEFAULTS
    from pytest_libero.config.plan import make_plan

    return make_plan(
        profile,
        SelectionRequest(scope="task_coverage", suite=case.suite, task_ids=(case.index,),
                         **({} if full_states is None else
                            {"mode": "full", "init_states": tuple(full_states)})),
        budget_mode="decisions",
        max_policy_calls=math.ceil(controls / replan_interval),
        replan_interval=replan_interval,
        adapter=str(DEFAULTS["adapter"]),
        render=render or str(DEFAULTS["render"]),
        video_stride=video_stride or int(DEFAULTS["video-stride"] or 1),
    )


def watchdog_for(plan: Any) -> Any:
    """The plugin's default watchdog for this plan (--libero-build/step-timeout unset)."""
    from pytest_libero.config.options import DEFAULTS
    from pytest_libero.config.plan import Watchdog

    return Watchdog.for_plan(plan, build_s=float(DEFAULTS["build-timeout"] or 0),
                             step_s=float(DEFAULTS["step-timeout"] or 0))


def renders_text(renders: Any) -> str:
    """Real renders per camera, as 'agentview+wrist', or 'all' when nothing is gated."""
    if not renders:
        return "every control"
    return "+".join(str(renders.get(camera, 0)) for camera in ("agentview", "robot0_eye_in_hand"))


def run_plugin_case(plan: Any, case: Any, policy: Any, case_dir: Path) -> dict[str, Any]:
    """One plugin case in this process, evidence and video on; returns timings."""
    from pytest_libero.episode.case import run_case_with_evidence

    t0 = time.perf_counter()
    record = run_case_with_evidence(plan, case, policy, case_dir)
    whole = time.perf_counter() - t0
    if record["outcome"] == "errored":
        raise RuntimeError(f"the plugin case errored: {record['summary']}")
    return {"whole_s": whole, **record_figures(record)}


def record_figures(record: dict[str, Any]) -> dict[str, Any]:
    timings = record.get("timings", {})
    return {
        "setup_s": float(timings.get("setup_s", math.nan)),
        "episode_s": float(timings.get("episode_s", math.nan)),
        "controls": record["counters"]["executed_controls"],
        "calls": record["counters"]["policy_calls"],
        "renders": renders_text(record.get("renders")),
    }


def evidence_hashes(case_dir: Path) -> list[dict[str, str]]:
    """The sha256 of every delivered image, per call, from observations.jsonl."""
    import json

    hashes = []
    with (Path(case_dir) / "observations.jsonl").open() as stream:
        for line in stream:
            images = json.loads(line)["images"]
            hashes.append({camera: data["sha256"] for camera, data in images.items()})
    return hashes


# ------------------------------------------------------------- a bare native loop


class BareEpisode:
    """The protocol's env steps on a fresh native env, nothing else.

    render="consumed": both cameras are rendered only for the observations a policy
    receives (after the last settling control and after the last control of each
    chunk). render="native": LIBERO's default, both cameras after every control.
    ``video_stride``: agentview also renders every that many controls (for a video).
    """

    def __init__(self, case: Any, control_cap: int, render: str = "consumed",
                 video_stride: int | None = None) -> None:
        import numpy as np
        from libero.libero.envs import OffScreenRenderEnv

        from pytest_libero.catalog.inventory import installed_files, load_states
        from pytest_libero.protocol.parameters import (
            CAMERAS,
            IMAGE_SIZE,
            INIT_STATE_INDEX,
            SEED,
            SETTLE_ACTION,
            SETTLE_CONTROLS,
        )

        self.cameras = CAMERAS
        self.video_stride = video_stride
        self.controls = 0
        bddl, states_file = installed_files(case.bddl_file, case.init_states_file)
        state = np.ascontiguousarray(load_states(states_file)[INIT_STATE_INDEX], dtype=np.float64)
        self.env = OffScreenRenderEnv(
            bddl_file_name=str(bddl), camera_heights=IMAGE_SIZE, camera_widths=IMAGE_SIZE,
            horizon=SETTLE_CONTROLS + control_cap + 1, ignore_done=True,
        )
        self.env.seed(SEED)
        self.env.reset()
        self.gate = CameraGate(self.env.env, CAMERAS, IMAGE_SIZE) if render == "consumed" else None
        self.obs = self.env.set_init_state(state)
        settle = np.asarray(SETTLE_ACTION, dtype=np.float64)
        for i in range(SETTLE_CONTROLS):
            self.step(settle, consumed=i == SETTLE_CONTROLS - 1, settling=True)

    def step(self, action: Any, *, consumed: bool, settling: bool = False) -> bool:
        import numpy as np

        if self.gate is not None:
            self.gate.want = consumed
            if not settling and self.video_stride is not None:
                self.controls += 1
                if self.controls % self.video_stride == 0:
                    self.gate.gates["agentview"].wanted = True
        self.obs, _, done, _ = self.env.step(action)
        if self.video_stride is not None and not settling:
            self.frame = np.ascontiguousarray(self.obs["agentview_image"][::-1, ::-1])
        return bool(done)

    def images(self) -> dict[str, Any]:
        import numpy as np

        return {c: np.ascontiguousarray(self.obs[f"{c}_image"][::-1, ::-1]) for c in self.cameras}

    def close(self) -> None:
        self.env.close()


def run_bare(case: Any, controls: int, replan_interval: int, *, render: str = "consumed",
             policy: Any = None, hashes: list[dict[str, str]] | None = None,
             video_stride: int | None = None) -> dict[str, Any]:
    """Build, settle, then ``controls`` controls of [0]*6+[-1] asking ``policy`` every K.

    The in-process zero policy by default. ``video_stride``: agentview also renders (and
    is copied out, as for a video frame) every that many controls. Returns
    setup/episode/whole seconds.
    """
    from pytest_libero.policy.builtin import ZeroPolicy
    from pytest_libero.policy.contract import Observation, validate_reply
    from pytest_libero.protocol.hashing import array_sha256

    policy = policy or ZeroPolicy(chunk=replan_interval)
    t0 = time.perf_counter()
    episode = BareEpisode(case, controls, render, video_stride)
    t1 = time.perf_counter()
    executed = calls = 0
    try:
        while executed < controls:
            images = episode.images()
            if hashes is not None:
                hashes.append({c: array_sha256(img) for c, img in images.items()})
            reply = validate_reply(policy.infer(Observation(
                language=case.language, images=images,
                policy_calls=calls, executed_controls=executed)))
            calls += 1
            assert reply.actions is not None
            prefix = reply.actions[: min(replan_interval, controls - executed)]
            for i, action in enumerate(prefix):
                last = i == len(prefix) - 1 and executed + 1 < controls
                success = episode.step(action, consumed=last)
                executed += 1
                if success:
                    break
            if success:
                break
        t2 = time.perf_counter()
    finally:
        episode.close()
    t3 = time.perf_counter()
    return {
        "whole_s": t3 - t0, "setup_s": t1 - t0, "episode_s": t2 - t1,
        "controls": executed, "calls": calls,
        "renders": "every control" if episode.gate is None else renders_text(episode.gate.renders),
    }


# ----------------------------------------------------------------- process trees


class TreeMemory:
    """Samples a process tree's memory while it runs: the peak over time of the sum over
    each *group* of processes (the root's whole tree, or each child's subtree when
    ``per_child``: an xdist controller's workers). RSS counts pages shared by forked
    processes once per process (an upper bound); PSS splits them between the sharers."""

    def __init__(self, root: int, *, per_child: bool, every_s: float = 0.5) -> None:
        import threading

        self.root, self.per_child, self.every_s = root, per_child, every_s
        self.peak_rss_kb = self.peak_pss_kb = 0
        self.peak_processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            tree = proctree.children()
            roots = tree.get(self.root, []) if self.per_child else [self.root]
            for group in ([top, *proctree.descendants(top, tree)] for top in roots):
                memory = [proctree.memory_kib(pid) for pid in group]
                self.peak_rss_kb = max(self.peak_rss_kb, sum(m[0] for m in memory))
                self.peak_pss_kb = max(self.peak_pss_kb, sum(m[1] for m in memory))
                self.peak_processes = max(self.peak_processes, len(group))

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return {"peak_rss_mib": self.peak_rss_kb / 1024, "peak_pss_mib": self.peak_pss_kb / 1024}
