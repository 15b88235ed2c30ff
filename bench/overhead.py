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

    c.prepare_simulator()
    from libero.libero.envs import OffScreenRenderEnv  # noqa: F401  (import cost out of the timings)

    from pytest_libero.episode.case import run_case
    from pytest_libero.policy.openpi.transport import WebsocketPolicy

    case = c.catalog_entry(args.suite, args.task)
    print(f"# overhead: {case.case_id} ({case.name}), N={args.controls} controls, "
          f"K={args.replan_interval}, {args.repeats} repeats, plugin render="
          f"{args.render or 'default'}, video stride={args.video_stride or 'default'}")
    print(f"# {c.machine_note()}")

    work = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    results: dict[str, list[dict[str, Any]]] = {}
    profile_text = ""
    plugin_hashes: list[dict[str, str]] | None = None
    bare_hashes: list[dict[str, str]] = []
    try:
        with c.zero_server(chunk=args.replan_interval) as uri:
            ws_profile = c.websocket_profile(uri, work)

            def plan(profile: Any, render: str | None = args.render) -> Any:
                return c.plan_for(profile, case, args.controls, args.replan_interval,
                                  render=render, video_stride=args.video_stride)

            ws_plan = plan(ws_profile)
            policy: WebsocketPolicy = ws_profile.build_policy()
            policy.reset()  # connect once, as the session fixture does
            inproc_plan = plan(c.inprocess_zero_profile(args.replan_interval))
            inproc_policy = inproc_plan.profile.build_policy()
            serial = iter(range(10**6))

            def plugin(run_plan: Any, pol: Any) -> dict[str, Any]:
                nonlocal plugin_hashes
                case_dir = work / f"case-{next(serial)}"
                out = c.run_plugin_case(run_plan, case, pol, case_dir)
                if plugin_hashes is None:
                    plugin_hashes = c.evidence_hashes(case_dir)
                shutil.rmtree(case_dir, ignore_errors=True)
                return out

            def noevidence() -> dict[str, Any]:
                t0 = time.perf_counter()
                record = run_case(ws_plan, case, policy)
                return {"whole_s": time.perf_counter() - t0, **c.record_figures(record)}

            def isolated() -> dict[str, Any]:
                from pytest_libero.episode.host import run_isolated

                case_dir = work / f"case-{next(serial)}"
                t0 = time.perf_counter()
                record = run_isolated(ws_plan, case, case_dir, c.watchdog_for(ws_plan))
                whole = time.perf_counter() - t0
                shutil.rmtree(case_dir, ignore_errors=True)
                if record["outcome"] == "errored":
                    raise RuntimeError(record["summary"])
                return {"whole_s": whole, **c.record_figures(record)}

            variants: dict[str, Any] = {
                "bare": lambda: c.run_bare(case, args.controls, args.replan_interval,
                                           hashes=bare_hashes if not bare_hashes else None),
                "plugin": lambda: plugin(ws_plan, policy),
            }
            if args.breakdown:
                render_all = plan(ws_profile, render="all")
                variants["plugin-render-all"] = lambda: plugin(render_all, policy)
                variants["plugin-inproc"] = lambda: plugin(inproc_plan, inproc_policy)
                variants["plugin-noevidence"] = noevidence
                variants["plugin-isolated"] = isolated

            if not args.no_warmup:
                c.run_bare(case, args.replan_interval, args.replan_interval)  # EGL, caches
            names = list(variants)
            for repeat in range(args.repeats):
                for name in c.interleaved_order(names, repeat):
                    cpu0 = c.cpu_seconds()
                    out = variants[name]()
                    # The isolated case runs in a forkserver grandchild: not counted here.
                    out["cpu_s"] = math.nan if name == "plugin-isolated" else c.cpu_seconds() - cpu0
                    results.setdefault(name, []).append(out)
                    print(f"#   repeat {repeat + 1} {name:<18} whole {out['whole_s']:7.2f} s  "
                          f"episode {out['episode_s']:6.2f} s  CPU {out['cpu_s']:6.2f} s", flush=True)
            if args.profile:
                profile_text = profile_case(lambda: plugin(ws_plan, policy))
            policy.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)

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
    if args.breakdown:
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
    if plugin_hashes is not None and bare_hashes:
        same = plugin_hashes == bare_hashes
        print(f"bare loop images bit-identical to the plugin's delivered observations: "
              f"{'yes' if same else 'NO'} ({len(bare_hashes)} observations compared)")
    if profile_text:
        print(profile_text)
    return 0


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
