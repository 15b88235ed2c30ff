"""Episodes per hour on one GPU: -n 1, 4, 8 and 16 workers, EGL rendering, a zero policy.

    MUJOCO_GL=egl python bench/gpu_throughput.py                  # -n 1,4,8,16 on GPU 0
    MUJOCO_GL=egl python bench/gpu_throughput.py --render default,all --json figures.json
    MUJOCO_GL=egl python bench/gpu_throughput.py --gpu 1 --controls 520 --cases-per-worker 3
    python bench/gpu_throughput.py --workers 1 --controls 5 --allow-cpu   # a smoke run anywhere

For a machine with a GPU (docs/scale.md says how to read the result). Each worker count
runs one fresh ``python -m pytest -p no:cacheprovider --libero-profile=zero
--libero-gpus=G -n W`` (every worker on GPU G: its EGL device and its CUDA device), with
``--cases-per-worker`` x W fast-mode cases of libero_90 (tasks 0, 1, 2, ... in native
order, so every run's cases are distinct tasks of one suite), each of ``--controls``
controls in chunks of K (the decisions budget), at the plugin's defaults otherwise
(process isolation, full evidence, a video frame every control). The zero policy runs
in-process, so the GPU only renders: the figure is the rendering side's capacity,
before a model shares the machine. Wall time covers the whole command; episodes per
hour = cases / wall. ``--render`` repeats the grid for each of the plugin's render
modes (``default``: the decision controls only; ``all``: every control, as datasets and
the realtime clock need).

While each run goes, the machine's use is sampled (bench/_machine_use.py): the busy
share of the CPU cores from /proc/stat, the GPU's memory and utilisation from
nvidia-smi; the row names the limit they point to (the GPU, the CPU cores, or neither:
each worker's own serial chain). From each run's records the script prints which GL
vendor and renderer every worker's cases were drawn by, on which EGL device, and the
renderer's fingerprint against those this package knows (``data/renderers.json``, the
CPU machines' llvmpipe among them).

Before the runs, one case renders once and the script prints the OpenGL renderer and
vendor that MuJoCo's EGL context got: on a GPU machine it must name the GPU's driver
(NVIDIA), not Mesa's llvmpipe, or the figures are the CPU's. Without a GPU renderer the
script stops unless ``--allow-cpu`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import _common as c
from _machine_use import UseSampler

PROBE = """
import sys
sys.path.insert(0, {root!r})
from pytest_libero.adapters.libero import prepare_simulator_environment
prepare_simulator_environment()
from libero.libero.envs import OffScreenRenderEnv
from OpenGL import GL
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.inventory import installed_files
case = load_catalog().suite_entries("libero_90")[0]
bddl, _ = installed_files(case.bddl_file, case.init_states_file)
env = OffScreenRenderEnv(bddl_file_name=str(bddl), camera_heights=256, camera_widths=256)
env.reset()  # renders both cameras: the context is current
print("renderer:", GL.glGetString(GL.GL_RENDERER).decode())
print("vendor:", GL.glGetString(GL.GL_VENDOR).decode())
env.close()
"""


def gl_renderer(gpu: int) -> str:
    """The GL renderer and vendor of a LIBERO env's EGL context on this GPU."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu), "MUJOCO_EGL_DEVICE_ID": str(gpu)}
    env.setdefault("MUJOCO_GL", "egl")
    done = subprocess.run([sys.executable, "-c", PROBE.format(root=str(c.ROOT))],
                          capture_output=True, text=True, env=env, check=False, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith(("renderer:", "vendor:"))]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the render probe failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return "; ".join(lines)


VLA_EVAL_PER_HOUR = 2000 / 18 * 60
"""vla-eval's published anchor: 2,000 LIBERO episodes in about 18 minutes on one H100
(50 render shards, a batching 7B server, shards on a separate CPU host)."""


def worker_renderers(results: Path) -> dict[str, dict[str, Any]]:
    """Each worker's renderer as its cases recorded it: GL vendor, renderer, version,
    fingerprint, its standing among known renderers, and the EGL device it rendered on."""
    from pytest_libero.evidence.renderer import describe, standing

    found: dict[str, dict[str, Any]] = {}
    for record in c.all_records(results):
        fingerprint = (record.get("identity") or {}).get("renderer") or {}
        found.setdefault(str(record.get("worker")), {
            "vendor": fingerprint.get("vendor"), "renderer": fingerprint.get("renderer"),
            "version": fingerprint.get("version"), "sha256": fingerprint.get("sha256"),
            "described": describe(fingerprint or None), "standing": standing(fingerprint or None),
            "egl_device": record.get("egl_device"), "gpu": record.get("gpu")})
    return dict(sorted(found.items()))


def run_workers(workers: int, render: str, args: argparse.Namespace) -> dict[str, Any]:
    cases = workers * args.cases_per_worker
    if cases > 90:
        raise SystemExit(f"-n {workers} x {args.cases_per_worker} cases exceeds libero_90's 90 tasks")
    calls = -(-args.controls // args.replan_interval)
    command = [
        "-q", "--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_90",
        f"--libero-task-ids=0-{cases - 1}", "--libero-budget-mode=decisions",
        f"--libero-max-policy-calls={calls}", f"--libero-replan-interval={args.replan_interval}",
        f"--libero-policy-option=chunk={args.replan_interval}",
        f"--libero-gpus={args.gpu}", "-n", str(workers),
        *([] if render == "default" else [f"--libero-render={render}"]),
    ]
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    with UseSampler() as use:
        out = c.timed_pytest(command, f"-n {workers} render={render}", expected=cases, env=env,
                             keep=worker_renderers)
    return {**out, "use": use.summary()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="1,4,8,16", help="comma-separated worker counts")
    parser.add_argument("--render", default="default", help="comma-separated render modes [default]")
    parser.add_argument("--gpu", type=int, default=0, help="the GPU every worker renders on")
    parser.add_argument("--controls", type=int, default=100, help="controls per episode [100]")
    parser.add_argument("--replan-interval", "-k", type=int, default=5)
    parser.add_argument("--cases-per-worker", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run even when the EGL renderer is not a GPU's (a smoke run)")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    renders = [r.strip() for r in args.render.split(",") if r.strip()]
    print(f"# gpu throughput: GPU {args.gpu}, workers {counts}, render {renders}, "
          f"{args.cases_per_worker} cases per worker, {args.controls} controls, "
          f"K={args.replan_interval}, zero policy in-process")
    print(f"# {c.machine_note()}")
    renderer = gl_renderer(args.gpu)
    print(f"# {renderer}")
    if "llvmpipe" in renderer.lower() or "mesa" in renderer.lower():
        if not args.allow_cpu:
            raise SystemExit("EGL renders on the CPU (Mesa) here, not on a GPU: these would be CPU "
                             "figures; check the NVIDIA EGL vendor file (docs/scale.md) or pass "
                             "--allow-cpu for a smoke run")
        print("# NOTE: rendering on the CPU (--allow-cpu): not GPU figures")
    rows, runs = [], []
    for render in renders:
        base: float | None = None
        for workers in counts:
            out = run_workers(workers, render, args)
            per_hour = out["cases"] / out["wall_s"] * 3600
            base = base or per_hour / workers
            use = out["use"]
            runs.append({"render": render, "workers": workers, "episodes_per_hour": per_hour,
                         "controls_per_hour": per_hour * args.controls, **out})
            rows.append([render, workers, out["cases"], out["wall_s"], per_hour,
                         per_hour / VLA_EVAL_PER_HOUR, out["per_case_s"], per_hour / (base * workers),
                         f"{use['cpu_busy_mean'] * use['cores']:.1f} of {use['cores']}",
                         "-" if use["gpu_memory_peak_mib"] is None else f"{use['gpu_memory_peak_mib']:.0f}",
                         "-" if use["gpu_util_mean"] is None else f"{use['gpu_util_mean']:.0f}",
                         use["limit"]])
            print(f"#   render={render} -n {workers}: {out['cases']} episodes in {out['wall_s']:.1f} s; "
                  f"limit: {use['limit']}", flush=True)
    print()
    c.print_table(["render", "workers", "episodes", "wall s", "episodes per hour",
                   "x vla-eval's 6,667/h", "per case s (setup+episode, median)",
                   f"scaling efficiency vs -n {counts[0]}", "CPU cores busy (mean)",
                   "GPU memory peak MiB", "GPU util mean %", "limit"], rows)
    widest = runs[-1]
    print(f"\n# workers' renderers in the render={widest['render']} -n {widest['workers']} run:")
    for worker, seen in widest["kept"].items():
        print(f"#   {worker}: {seen['vendor']} / {seen['renderer']} on EGL device {seen['egl_device']} "
              f"(fingerprint {str(seen['sha256'])[:12]}, {seen['standing']})")
    if args.json is not None:
        args.json.write_text(json.dumps({"renderer_probe": renderer, "machine": c.machine_note(),
                                         "controls": args.controls, "runs": runs}, indent=1,
                                        default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
