"""Our plugin case against a conventional LIBERO evaluation loop, at equal evidence.

    python bench/conventional.py                       # libero_10 task 0, 40 controls, K=5, 3 repeats
    python bench/conventional.py --isolation process   # our case as the plugin's default runs it
    python bench/conventional.py --controls 200 --repeats 5

Both variants drive the same zero policy server (``python -m pytest_libero.serve
--policy zero`` on 127.0.0.1) for the same N controls in chunks of K, on the same task,
interleaved (the order rotates every repeat):

* ours: ``pytest_libero.episode.case.run_case_with_evidence`` with the plugin's WebsocketPolicy,
  evidence and video on (lossless observation streams, actions, episode.mp4), with the
  plugin's default rendering and video stride (``--render`` / ``--video-stride`` pass
  --libero-render / --libero-video-stride). ``--isolation process`` runs it through
  ``pytest_libero.episode.host.run_isolated`` (the plugin's default) instead of in-process.
* conventional: the loop public evaluators write (openpi's examples/libero/main.py):
  LIBERO's default observations (both cameras rendered after every control, the
  settling controls included), a fresh ``[::-1, ::-1]`` copy of both images every
  control, the agentview frame appended to a Python list, resized 224x224 copies of
  both images for the policy at every decision (openpi_client.image_tools
  resize_with_pad, or PIL/cv2; openpi's example resizes at every control:
  ``--resize-every-control``), the request sent with the reference openpi client
  (``openpi_client.WebsocketClientPolicy``, or ours when it is not installed), and the
  list written as an MP4 with imageio at the end, so both sides produce a video.

Both build a fresh env for the case. (openpi's example builds one env per task and
resets it for each of its 50 trials, so over a 50-trial run its build cost is spread;
the protocol here wants a fresh env per episode, and fast mode runs one per task.)

"episode" is the control loop (for the conventional loop, writing its video is
reported apart, since it happens after the loop); "whole" is the case end to end with
env build and close. "CPU" is this process's CPU time plus its reaped children's (not
counted for ``--isolation process``, whose case runs in a forkserver grandchild).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import _common as c
import numpy as np


def resizer(kind: str) -> Any:
    if kind == "openpi":
        from openpi_client import image_tools

        return lambda img: image_tools.convert_to_uint8(image_tools.resize_with_pad(img, 224, 224))
    if kind == "pil":
        from PIL import Image

        return lambda img: np.asarray(Image.fromarray(img).resize((224, 224), Image.BILINEAR))
    if kind == "cv2":
        import cv2

        return lambda img: cv2.resize(img, (224, 224), interpolation=cv2.INTER_LINEAR)
    raise SystemExit(f"unknown --resize {kind}")


class OursClient:
    """Our client with openpi's infer(dict) -> dict signature (fallback)."""

    def __init__(self, uri: str) -> None:
        from pytest_libero.policy.openpi.client import WebsocketPolicyClient

        self.client = WebsocketPolicyClient(uri, connect_timeout=10, call_timeout=60)
        self.client.connect(wait_s=10)

    def infer(self, obs: dict[str, Any]) -> dict[Any, Any]:
        return self.client.infer(obs)


def conventional_episode(case: Any, client: Any, controls: int, replan_interval: int,
                         resize: Any, video: Path, every_control: bool) -> dict[str, Any]:
    """openpi's LIBERO example loop, minus its logging, for ``controls`` controls."""
    import imageio
    from libero.libero.envs import OffScreenRenderEnv

    from pytest_libero.catalog.inventory import installed_files, load_states
    from pytest_libero.protocol.parameters import SEED, SETTLE_ACTION, SETTLE_CONTROLS

    t0 = time.perf_counter()
    bddl, states_file = installed_files(case.bddl_file, case.init_states_file)
    env = OffScreenRenderEnv(bddl_file_name=str(bddl), camera_heights=256, camera_widths=256)
    env.seed(SEED)
    env.reset()
    obs = env.set_init_state(load_states(states_file)[0])
    dummy = list(SETTLE_ACTION)
    for _ in range(SETTLE_CONTROLS):
        obs, _, _, _ = env.step(dummy)
    t1 = time.perf_counter()
    replay_images: list[np.ndarray] = []
    action_plan: collections.deque[np.ndarray] = collections.deque()
    calls = executed = 0
    state = np.zeros(8, dtype=np.float32)
    while executed < controls:
        img = np.ascontiguousarray(obs["agentview_image"][::-1, ::-1])
        wrist = np.ascontiguousarray(obs["robot0_eye_in_hand_image"][::-1, ::-1])
        if every_control:  # openpi resizes before knowing whether it will ask
            small, small_wrist = resize(img), resize(wrist)
        replay_images.append(img)
        if not action_plan:
            if not every_control:
                small, small_wrist = resize(img), resize(wrist)
            element = {
                "observation/image": small,
                "observation/wrist_image": small_wrist,
                "observation/state": state,
                "prompt": str(case.language),
            }
            chunk = client.infer(element)["actions"]
            calls += 1
            action_plan.extend(chunk[:replan_interval])
        action = action_plan.popleft()
        obs, _, done, _ = env.step(action.tolist())
        executed += 1
        if done:
            break
    replay_images.append(np.ascontiguousarray(obs["agentview_image"][::-1, ::-1]))
    t2 = time.perf_counter()
    imageio.mimwrite(video, [np.asarray(x) for x in replay_images], fps=20)
    t3 = time.perf_counter()
    env.close()
    t4 = time.perf_counter()
    return {"setup_s": t1 - t0, "episode_s": t2 - t1, "video_s": t3 - t2, "whole_s": t4 - t0,
            "controls": executed, "calls": calls, "renders": "every control"}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    c.episode_arguments(parser)
    parser.add_argument("--resize", default="openpi", choices=("openpi", "pil", "cv2"))
    parser.add_argument("--resize-every-control", action="store_true",
                        help="resize both images every control, as openpi's example does")
    parser.add_argument("--isolation", default="none", choices=("none", "process"),
                        help="run our case in-process (none) or as the plugin's default (process)")
    parser.add_argument("--render", choices=("consumed", "all"), help="our --libero-render")
    parser.add_argument("--video-stride", type=int, help="our --libero-video-stride")
    parser.add_argument("--no-warmup", action="store_true")
    args = parser.parse_args()
    if args.controls % args.replan_interval:
        parser.error("--controls must be a multiple of --replan-interval")
    return args


def main() -> int:
    args = arguments()
    c.prepare_simulator()
    from libero.libero.envs import OffScreenRenderEnv  # noqa: F401  (import cost out of the timings)

    try:
        resize = resizer(args.resize)
    except ImportError:
        print(f"# (--resize {args.resize}: not importable, using PIL)")
        resize = resizer("pil")
    case = c.catalog_entry(args.suite, args.task)
    print(f"# conventional: {case.case_id}, N={args.controls} controls, K={args.replan_interval}, "
          f"{args.repeats} repeats, ours isolation={args.isolation}, render="
          f"{args.render or 'default'}, video stride={args.video_stride or 'default'}, resize={args.resize}"
          f"{' every control' if args.resize_every_control else ' per decision'}")
    print(f"# {c.machine_note()}")

    work = Path(tempfile.mkdtemp(prefix="bench-conventional-"))
    try:
        with c.zero_server(chunk=args.replan_interval) as uri:
            variants = Variants(args, case, work, uri, resize)
            if not args.no_warmup:
                c.run_bare(case, args.replan_interval, args.replan_interval)
            results = variants.repeat()
            variants.policy.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_results(results)
    return 0


def conventional_client(uri: str) -> Any:
    """openpi's reference client when installed, else ours."""
    try:
        from openpi_client.websocket_client_policy import WebsocketClientPolicy

        with warnings.catch_warnings():  # websockets: connect() outside a with block
            warnings.simplefilter("ignore", DeprecationWarning)
            client: Any = WebsocketClientPolicy(uri)
        print("# conventional client: openpi_client.WebsocketClientPolicy")
    except ImportError:
        client = OursClient(uri)
        print("# conventional client: ours (openpi-client is not installed)")
    return client


class Variants:
    """Our case and the conventional loop, over one zero-policy server at ``uri``."""

    def __init__(self, args: argparse.Namespace, case: Any, work: Path, uri: str, resize: Any) -> None:
        self.args, self.case, self.work, self.resize = args, case, work, resize
        self.conv_client = conventional_client(uri)
        profile = c.websocket_profile(uri, work)
        self.plan = c.plan_for(profile, case, args.controls, args.replan_interval,
                               render=args.render, video_stride=args.video_stride)
        self.policy = profile.build_policy()
        self.policy.reset()
        self.serial = iter(range(10**6))

    def ours(self) -> dict[str, Any]:
        case_dir = self.work / f"case-{next(self.serial)}"
        if self.args.isolation == "process":
            from pytest_libero.episode.host import run_isolated

            t0 = time.perf_counter()
            record = run_isolated(self.plan, self.case, case_dir, c.watchdog_for(self.plan))
            whole = time.perf_counter() - t0
            if record["outcome"] == "errored":
                raise RuntimeError(record["summary"])
            out = {"whole_s": whole, **c.record_figures(record)}
        else:
            out = c.run_plugin_case(self.plan, self.case, self.policy, case_dir)
        out["video_s"] = float("nan")
        shutil.rmtree(case_dir, ignore_errors=True)
        return out

    def conventional(self) -> dict[str, Any]:
        args = self.args
        video = self.work / f"conventional-{next(self.serial)}.mp4"
        out = conventional_episode(self.case, self.conv_client, args.controls, args.replan_interval,
                                   self.resize, video, args.resize_every_control)
        video.unlink(missing_ok=True)
        return out

    def repeat(self) -> dict[str, list[dict[str, Any]]]:
        """Both variants ``--repeats`` times, interleaved (the order rotates every repeat)."""
        args = self.args
        results: dict[str, list[dict[str, Any]]] = {"ours": [], "conventional": []}
        variants = {"ours": self.ours, "conventional": self.conventional}
        for repeat in range(args.repeats):
            for name in c.interleaved_order(list(variants), repeat):
                cpu0 = c.cpu_seconds()
                out = variants[name]()
                isolated = name == "ours" and args.isolation == "process"
                out["cpu_s"] = float("nan") if isolated else c.cpu_seconds() - cpu0
                results[name].append(out)
                print(f"#   repeat {repeat + 1} {name:<13} whole {out['whole_s']:7.2f} s  "
                      f"episode {out['episode_s']:6.2f} s  CPU {out['cpu_s']:6.2f} s", flush=True)
        return results


def print_results(results: dict[str, list[dict[str, Any]]]) -> None:
    print()
    rows = []
    for name, runs in results.items():
        rows.append([name, len(runs), c.median([r["setup_s"] for r in runs]),
                     c.median([r["episode_s"] for r in runs]),
                     c.median([r["video_s"] for r in runs]),
                     c.median([r["whole_s"] for r in runs]), c.median([r["cpu_s"] for r in runs]),
                     runs[0]["renders"], runs[0]["controls"], runs[0]["calls"]])
    c.print_table(["variant", "runs", "setup s", "episode s", "video write s", "whole case s",
                   "whole case CPU s", "renders (agentview+wrist)", "controls", "policy calls"], rows)
    med = {n: {k: c.median([r[k] for r in runs]) for k in ("episode_s", "whole_s", "cpu_s")}
           for n, runs in results.items()}
    print()
    print(c.ratio_line("episode ratio ours/conventional", med["ours"]["episode_s"],
                       med["conventional"]["episode_s"]))
    print(c.ratio_line("whole-case ratio ours/conventional", med["ours"]["whole_s"],
                       med["conventional"]["whole_s"], "<= 0.75"))
    print(c.ratio_line("whole-case CPU ratio ours/conventional", med["ours"]["cpu_s"],
                       med["conventional"]["cpu_s"]))


if __name__ == "__main__":
    raise SystemExit(main())
