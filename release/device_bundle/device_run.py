"""What one device call runs once the bundle is unpacked: the GPU benchmark and the demo.

    python3 BUNDLE/device_run.py --out DIR            # on the GPU machine (about 7 minutes)
    python3 BUNDLE/device_run.py --out DIR --smoke    # anywhere: -n 1, 5 controls, CPU allowed
    python3 BUNDLE/device_run.py --out DIR --smoke --video-stride 5  # the demo's video at 4 fps

Standard library only; it runs the machine's own ``python3`` with the bundle's folders
on the path and everything else pointed inside the bundle (HOME, caches), no package
index. It makes sure the GL and EGL loaders are there (Debian's, from ``debs/``, only
where the machine lacks them), then writes to ``--out`` (at most 8 files come back from
a device call): ``environment.txt`` (the GPU, GL loaders, any requirement the machine's
own packages miss), ``bench.txt`` and ``bench.json`` (bench/gpu_throughput.py),
``demo.txt`` and ``summary.json`` (the figures, the demo's verdicts and wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BUNDLE = Path(__file__).resolve().parent
NVIDIA_EGL_VENDOR = Path("/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json")
GL_LIBRARIES = ("libEGL.so.1", "libOpenGL.so.0")
DEVICE = {"workers": "1,4,8,16", "render": "default,all", "controls": "100", "cases_per_worker": "2",
          "demo_workers": "5"}
SMOKE = {"workers": "1", "render": "default", "controls": "5", "cases_per_worker": "1",
         "demo_workers": "2"}


def environment(home: Path) -> dict[str, str]:
    """The runs' environment: the bundle's folders first on the path, no index, a fresh
    HOME and caches inside the bundle's scratch folder."""
    for folder in ("home", "cache"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env.update({
        "PYTHONPATH": os.pathsep.join(str(BUNDLE / folder) for folder in ("site", "assets")),
        "HOME": str(home / "home"), "XDG_CACHE_HOME": str(home / "cache"),
        "NUMBA_CACHE_DIR": str(home / "cache" / "numba"), "PIP_NO_INDEX": "1",
        "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl", "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    if NVIDIA_EGL_VENDOR.is_file() and "__EGL_VENDOR_LIBRARY_FILENAMES" not in env:
        env["__EGL_VENDOR_LIBRARY_FILENAMES"] = str(NVIDIA_EGL_VENDOR)
    return env


def gl_loaders() -> list[str]:
    """Install Debian's GL loaders where the machine lacks them (root only): what was done."""
    def present() -> list[str]:
        listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
        return [lib for lib in GL_LIBRARIES if lib in listed]

    found = present()
    if len(found) == len(GL_LIBRARIES):
        return [f"GL loaders present: {', '.join(found)}"]
    if os.geteuid() != 0 or shutil.which("dpkg") is None:
        return [f"GL loaders missing ({', '.join(set(GL_LIBRARIES) - set(found))}) and this is not "
                "root with dpkg: rendering will fail"]
    debs = sorted((BUNDLE / "debs").glob("*.deb"))
    for deb in debs:
        subprocess.run(["dpkg", "-x", str(deb), "/"], check=True)
    subprocess.run(["ldconfig"], check=True)
    return [f"GL loaders unpacked from {len(debs)} Debian packages: now {', '.join(present())}"]


def requirement_gaps(python: str, env: dict[str, str]) -> str:
    """What ``requirements_met.py`` says of the machine's packages, as text."""
    done = subprocess.run([python, str(BUNDLE / "requirements_met.py"), str(BUNDLE)], env=env,
                          capture_output=True, text=True, check=False)
    return (done.stdout + done.stderr).strip()


def tee(command: list[str], log: Path, env: dict[str, str], cwd: Path) -> tuple[int, float]:
    """Run, copying the output to the terminal and ``log`` as it comes; (exit, seconds)."""
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as stream:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env=env, cwd=cwd)
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            stream.write(line)
            stream.flush()
        code = process.wait()
    return code, time.monotonic() - start


def demo_verdicts(results: Path) -> dict[str, str]:
    verdicts = {}
    for path in sorted(results.rglob("results.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                verdicts[record["case"]] = record["outcome"]
    return verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smoke", action="store_true", help="a small CPU-allowed run (the proof here)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--scratch", type=Path, default=BUNDLE.parent / "scratch")
    parser.add_argument("--video-stride", type=int, metavar="N",
                        help="the demo's video keeps one frame every N controls [1: every one]; "
                             "5 renders a fifth as often (the builder's own test)")
    args = parser.parse_args()
    if args.video_stride is not None and args.video_stride < 1:
        parser.error(f"--video-stride {args.video_stride}: give 1 or more (1 keeps every control)")
    plan = SMOKE if args.smoke else DEVICE
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.scratch, ignore_errors=True)
    env = environment(args.scratch)
    started = time.monotonic()
    notes = gl_loaders()
    gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout.strip() \
        if shutil.which("nvidia-smi") else "no nvidia-smi"
    notes += [f"GPU: {gpus or 'none listed'}", f"python: {args.python}",
              f"requirements: {requirement_gaps(args.python, env)}"]
    (out / "environment.txt").write_text("\n".join(notes) + "\n", encoding="utf-8")
    print("\n".join(notes), flush=True)

    work = args.scratch / "demo"
    work.mkdir(parents=True)
    (work / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    stride = [] if args.video_stride is None else [f"--libero-video-stride={args.video_stride}"]
    demo_code, demo_s = tee([args.python, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                             "--libero-profile=demo", "-n", plan["demo_workers"],
                             *stride,
                             f"--libero-results={work / 'results'}"], out / "demo.txt", env, work)
    verdicts = demo_verdicts(work / "results")

    bench = [args.python, str(BUNDLE / "tools" / "bench" / "gpu_throughput.py"),
             "--workers", plan["workers"], "--render", plan["render"], "--controls", plan["controls"],
             "--cases-per-worker", plan["cases_per_worker"], "--json", str(out / "bench.json"),
             *(["--allow-cpu"] if args.smoke else [])]
    bench_code, bench_s = tee(bench, out / "bench.txt", env, args.scratch)
    summary = {"smoke": args.smoke, "environment": notes,
               "demo": {"exit": demo_code, "wall_s": round(demo_s, 1), "verdicts": verdicts},
               "bench": {"exit": bench_code, "wall_s": round(bench_s, 1)},
               "total_s": round(time.monotonic() - started, 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(json.dumps(summary, indent=1))
    passed = demo_code == 0 and bench_code == 0 and verdicts and set(verdicts.values()) == {"success"}
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
