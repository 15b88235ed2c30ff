"""Evaluator overhead: a full plugin case against a bare loop doing only the protocol's work.

    python bench/overhead.py                      # libero_10 task 0, 40 controls, K=5, 3 repeats
    python bench/overhead.py --video-stride 5     # the plugin with one video frame per decision
    python bench/overhead.py --controls 200 --repeats 5 --breakdown --profile

Variants, interleaved (the order rotates every repeat), each on a fresh env:

* plugin: ``pytest_libero.episode.case.run_case_with_evidence`` in this process with a
  WebsocketPolicy against ``python -m pytest_libero.serve --policy zero`` on
  127.0.0.1, evidence and video on, the plugin's default rendering and video stride
  (or --render / --video-stride): one case inside a pytest worker run with
  --libero-isolation=none.
* bare: a fresh native env (seed 20260907, reset, set_init_state(states[0]), ten
  settling controls), then N controls of [0,0,0,0,0,0,-1] from an in-process zero
  policy asked every K controls, rendering only the images the protocol consumes
  (both cameras, for each policy observation, gated at robosuite's own sampling
  phase); no evidence, no video, no socket.

With --breakdown, more variants show where the difference goes:

* plugin-render-all: the plugin with --libero-render=all (every camera, every control,
  as LIBERO does by default).
* plugin-inproc: the plugin case with the in-process zero policy (no socket).
* plugin-noevidence: ``run_case`` over the websocket without evidence or video.
* plugin-isolated: the plugin's default --libero-isolation=process: the case in a
  fresh forkserver child (``pytest_libero.episode.host.run_isolated``).

"episode" is the control loop alone (the plugin's own ``timings.episode_s``); "whole"
is the case end to end, env build, settling, evidence finishing and close included.
"CPU" adds this process's CPU time (all threads, the renderer's included) and its
reaped children's (the ffmpeg encoders); it moves less than wall time when other jobs
share the machine (the policy server's own CPU is not counted). The first bare run
also checks that its images are bit-identical to the ones the plugin delivered
(sha256 from the plugin's observations.jsonl).
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as c


def main() -> int:
    args = arguments()
    c.prepare_simulator()
    from libero.libero.envs import OffScreenRenderEnv  # noqa: F401  (import cost out of the timings)

    case = c.catalog_entry(args.suite, args.task)
    print(f"# overhead: {case.case_id} ({case.name}), N={args.controls} controls, "
          f"K={args.replan_interval}, {args.repeats} repeats, plugin render="
          f"{args.render or 'default'}, video stride={args.video_stride or 'default'}")
    print(f"# {c.machine_note()}")

    work = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    profile_text = ""
    try:
        with c.zero_server(chunk=args.replan_interval) as uri:
            bench = Variants(args, case, work, uri)
            variants = bench.variants()
            if not args.no_warmup:
                c.run_bare(case, args.replan_interval, args.replan_interval)  # EGL, caches
            results = repeat_variants(variants, args.repeats)
            if args.profile:
                profile_text = profile_case(lambda: bench.plugin(bench.ws_plan, bench.policy))
            bench.policy.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print_medians(results)
    print_ratios(results, args.breakdown)
    if bench.plugin_hashes is not None and bench.bare_hashes:
        same = bench.plugin_hashes == bench.bare_hashes
        print(f"bare loop images bit-identical to the plugin's delivered observations: "
              f"{'yes' if same else 'NO'} ({len(bench.bare_hashes)} observations compared)")
    if profile_text:
        print(profile_text)
    return 0


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    c.episode_arguments(parser)
    parser.add_argument("--render", choices=("consumed", "all"), help="the plugin's --libero-render")
    parser.add_argument("--video-stride", type=int, help="the plugin's --libero-video-stride")
    parser.add_argument("--breakdown", action="store_true", help="add the attribution variants")
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--profile", action="store_true",
                        help="afterwards, cProfile one more plugin case and show where it went")
    args = parser.parse_args()
    if args.controls % args.replan_interval:
        parser.error("--controls must be a multiple of --replan-interval")
    return args


class Variants:
    """The ways one case is run, over one zero-policy server at ``uri``: the plugin's
    (in several set-ups with --breakdown) and the bare loop. The first plugin case's and
    the first bare run's image hashes are kept for the bit-identity check."""

    def __init__(self, args: argparse.Namespace, case: Any, work: Path, uri: str) -> None:
        from pytest_libero.episode.case import run_case
        from pytest_libero.policy.openpi.transport import WebsocketPolicy

        self.run_case = run_case
        self.args, self.case, self.work = args, case, work
        self.ws_profile = c.websocket_profile(uri, work)
        self.ws_plan = self.plan(self.ws_profile)
        self.policy: WebsocketPolicy = self.ws_profile.build_policy()
        self.policy.reset()  # connect once, as the session fixture does
        self.inproc_plan = self.plan(c.inprocess_zero_profile(args.replan_interval))
        self.inproc_policy = self.inproc_plan.profile.build_policy()
        self.serial = iter(range(10**6))
        self.plugin_hashes: list[dict[str, str]] | None = None
        self.bare_hashes: list[dict[str, str]] = []

    def plan(self, profile: Any, render: str | None = None) -> Any:
        args = self.args
        return c.plan_for(profile, self.case, args.controls, args.replan_interval,
                          render=render or args.render, video_stride=args.video_stride)

    def variants(self) -> dict[str, Any]:
        """Variant name -> a call that runs it once and returns its figures."""
        args, case = self.args, self.case
        variants: dict[str, Any] = {
            "bare": lambda: c.run_bare(case, args.controls, args.replan_interval,
                                       hashes=self.bare_hashes if not self.bare_hashes else None),
            "plugin": lambda: self.plugin(self.ws_plan, self.policy),
        }
        if args.breakdown:
            render_all = self.plan(self.ws_profile, render="all")
            variants["plugin-render-all"] = lambda: self.plugin(render_all, self.policy)
            variants["plugin-inproc"] = lambda: self.plugin(self.inproc_plan, self.inproc_policy)
            variants["plugin-noevidence"] = self.noevidence
            variants["plugin-isolated"] = self.isolated
        return variants

    def plugin(self, run_plan: Any, pol: Any) -> dict[str, Any]:
        case_dir = self.work / f"case-{next(self.serial)}"
        out = c.run_plugin_case(run_plan, self.case, pol, case_dir)
        if self.plugin_hashes is None:
            self.plugin_hashes = c.evidence_hashes(case_dir)
        shutil.rmtree(case_dir, ignore_errors=True)
        return out

    def noevidence(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        record = self.run_case(self.ws_plan, self.case, self.policy)
        return {"whole_s": time.perf_counter() - t0, **c.record_figures(record)}

    def isolated(self) -> dict[str, Any]:
        from pytest_libero.episode.host import run_isolated

        case_dir = self.work / f"case-{next(self.serial)}"
        t0 = time.perf_counter()
        record = run_isolated(self.ws_plan, self.case, case_dir, c.watchdog_for(self.ws_plan))
        whole = time.perf_counter() - t0
        shutil.rmtree(case_dir, ignore_errors=True)
        if record["outcome"] == "errored":
            raise RuntimeError(record["summary"])
        return {"whole_s": whole, **c.record_figures(record)}


def repeat_variants(variants: dict[str, Any], repeats: int) -> dict[str, list[dict[str, Any]]]:
    """Every variant ``repeats`` times, interleaved (the order rotates every repeat)."""
    results: dict[str, list[dict[str, Any]]] = {}
    names = list(variants)
    for repeat in range(repeats):
        for name in c.interleaved_order(names, repeat):
            cpu0 = c.cpu_seconds()
            out = variants[name]()
            # The isolated case runs in a forkserver grandchild: not counted here.
            out["cpu_s"] = math.nan if name == "plugin-isolated" else c.cpu_seconds() - cpu0
            results.setdefault(name, []).append(out)
            print(f"#   repeat {repeat + 1} {name:<18} whole {out['whole_s']:7.2f} s  "
                  f"episode {out['episode_s']:6.2f} s  CPU {out['cpu_s']:6.2f} s", flush=True)
    return results


def print_medians(results: dict[str, list[dict[str, Any]]]) -> None:
    rows = []
    for name, runs in results.items():
        rows.append([
            name, len(runs),
            c.median([r["setup_s"] for r in runs]),
            c.median([r["episode_s"] for r in runs]),
            c.median([r["whole_s"] - r["setup_s"] - r["episode_s"] for r in runs]),
            c.median([r["whole_s"] for r in runs]),
            c.median([r["cpu_s"] for r in runs]),
            runs[0]["renders"], runs[0]["controls"], runs[0]["calls"],
        ])
    print()
    c.print_table(["variant", "runs", "setup s", "episode s", "rest s", "whole case s",
                   "whole case CPU s", "renders (agentview+wrist)", "controls", "policy calls"],
                  rows)
    print("(medians; setup = build, reset, settle; rest = whole - setup - episode: policy reset,\n"
          " evidence finishing, env close, record; renders counted after the env reset)")


def print_ratios(results: dict[str, list[dict[str, Any]]], breakdown: bool) -> None:
    med = {n: {k: c.median([r[k] for r in runs]) for k in ("episode_s", "whole_s", "setup_s", "cpu_s")}
           for n, runs in results.items()}
    print()
    print(c.ratio_line("episode ratio plugin/bare", med["plugin"]["episode_s"],
                       med["bare"]["episode_s"], "<= 1.10"))
    print(c.ratio_line("whole-case ratio plugin/bare", med["plugin"]["whole_s"],
                       med["bare"]["whole_s"], "<= 1.10"))
    print(c.ratio_line("whole-case CPU ratio plugin/bare", med["plugin"]["cpu_s"],
                       med["bare"]["cpu_s"]))
    paired = [p["whole_s"] / b["whole_s"] for p, b in zip(results["plugin"], results["bare"])]
    print(f"whole-case ratio, median of the {len(paired)} paired repeats = {c.median(paired):.3f}")
    if breakdown:
        def attribution(label: str, num: str, den: str, key: str = "episode_s") -> None:
            if num in med and den in med:
                print(c.ratio_line(label, med[num][key], med[den][key]))

        attribution("episode ratio plugin-render-all/plugin (rendering every control)",
                    "plugin-render-all", "plugin")
        attribution("episode ratio plugin/plugin-noevidence (evidence and video)",
                    "plugin", "plugin-noevidence")
        attribution("episode ratio plugin/plugin-inproc (the websocket)", "plugin", "plugin-inproc")
        attribution("whole-case ratio plugin-isolated/plugin (process isolation)",
                    "plugin-isolated", "plugin", "whole_s")


def profile_case(run: Any) -> str:
    """cProfile one plugin case; also the CPU its ffmpeg encoders used (other processes)."""
    import cProfile
    import io
    import pstats
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    run()
    prof.disable()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(18)
    stats.sort_stats("cumulative").print_stats(r"pytest_libero", 18)
    text = out.getvalue()
    return (f"\n## cProfile of one more plugin case ({wall:.1f} s under the profiler); its ffmpeg "
            f"encoders used {children:.1f} CPU-s in other processes\n" + text)


if __name__ == "__main__":
    raise SystemExit(main())
