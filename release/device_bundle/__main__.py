"""``python -m release.device_bundle OUT``: build the offline device bundle into OUT.

    python -m release.device_bundle .device-bundle            # trace, stage, pack (~10 min here)
    python -m release.device_bundle .device-bundle --traces T # reuse the strace logs in T
    python -m release.device_bundle .device-bundle --wheel W  # this checkout's wheel W, not built anew

Then, on the GPU machine, one call per part, the last one running everything:
``bash .device-bundle/part-1/run.sh`` carrying ``.device-bundle/part-1``, and so on
(docs/scale.md, "An air-gapped GPU machine").
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from release.device_bundle import dependencies, packing, staging, textures, tracing
from release.device_bundle.image import image_packages

MIB = 1 << 20
DEVICE_CARRY_BYTES = 64 * MIB
"""What one device call carries, the checkout's own files included."""
PART_CAP_BYTES = 60 * MIB
ON_ARRIVAL = ("device_run.py", "requirements_met.py")


def checkout_bytes() -> int:
    """The bytes of the checkout's files that travel with every device call (git's)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=staging.ROOT, capture_output=True, check=True).stdout
    return sum((staging.ROOT / name).stat().st_size for name in listed.decode().split("\0")
               if name and (staging.ROOT / name).is_file())


def recompress_textures(stage: Path) -> dict[str, dict[str, str]]:
    """Every large PNG of the stage as a lossless WebP where that pays: relative PNG path
    -> what arrival checks."""
    pngs = sorted(p for p in stage.rglob("*.png") if p.stat().st_size >= textures.LARGE_BYTES)
    kept: dict[str, dict[str, str]] = {}
    with ProcessPoolExecutor() as pool:
        webps = [png.with_name(png.name + textures.SUFFIX) for png in pngs]
        for png, found in zip(pngs, pool.map(textures.recompress, pngs, webps)):
            if found is not None:
                png.unlink()
                kept[png.relative_to(stage).as_posix()] = found
    return kept


def build(out: Path, part_bytes: int, traces: Path | None,
          bench_cases: int = tracing.BENCH_CASES, wheel: Path | None = None,
          preset: int = packing.PRESET) -> list[Path]:
    work = out / ".build"
    stage = work / "stage"
    stage.mkdir(parents=True)
    needed = dependencies.closure()
    carried = dependencies.carried(needed, image_packages())
    copied = [name for name in carried if name != dependencies.ROOT_DISTRIBUTION
              and name not in dependencies.PINNED and dependencies.is_pure(name)]
    downloaded = {name: version for name, version in carried.items()
                  if name not in copied and name != dependencies.ROOT_DISTRIBUTION}
    print(f"device bundle: carrying {len(carried)} of the {len(needed)} run-time distributions "
          f"(the GPU image holds the rest): {', '.join(sorted(carried))}; cp312 wheels of "
          f"{', '.join(sorted(downloaded))}", flush=True)
    wheels = dependencies.download_wheels(downloaded, work / "wheels")
    wheels.append(wheel or staging.project_wheel(work / "project"))
    staging.unpack_wheels(wheels, stage)

    logs = sorted(traces.glob("*.strace")) if traces else tracing.trace_runs(work / "traces", bench_cases)
    if not logs:
        raise SystemExit(f"device bundle: no *.strace log in {traces}")
    opened = tracing.opened_files(logs, [staging.site_packages_of("robosuite")])
    files = staging.copy_installed(copied, opened, stage)
    print(f"device bundle: {len(opened)} files the traced runs opened; {len(files)} files of "
          f"{len(copied)} pure-Python distributions staged", flush=True)
    staging.copy_tools(stage)
    for name in ON_ARRIVAL:
        shutil.copy2(Path(__file__).with_name(name), stage / name)
    staging.download_gl_packages(stage / "debs")
    kept = recompress_textures(stage)
    print(f"device bundle: {len(kept)} textures recompressed without loss", flush=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=staging.ROOT, capture_output=True,
                            text=True, check=False).stdout.strip()
    extra = {"built": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
             "commit": commit, "python": "3.12", "carried": carried, "textures": kept}
    parts = packing.write_parts(stage, out, part_bytes, extra, preset)
    shutil.rmtree(work)
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m release.device_bundle",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="a new folder (git-ignored: .device-bundle)")
    parser.add_argument("--part-mib", type=float,
                        help="the most one part may hold [60, less the checkout's own files' share of "
                             "a call's 64 MiB]")
    parser.add_argument("--traces", type=Path, help="reuse these strace logs instead of tracing anew")
    parser.add_argument("--bench-cases", type=int, default=tracing.BENCH_CASES, metavar="N",
                        help=f"trace the benchmark's first N tasks [{tracing.BENCH_CASES}, what its "
                             "largest run takes]; fewer only for a bundle that runs --smoke")
    parser.add_argument("--wheel", type=Path, metavar="PATH",
                        help="this checkout's pytest-libero wheel (python -m build), carried as it is "
                             "instead of building one [built anew]")
    parser.add_argument("--xz-preset", type=int, default=packing.PRESET, metavar="N",
                        help=f"xz's preset for the archive, 0 to 9 [{packing.PRESET}]; a lower one packs "
                             "several times faster into more bytes (the builder's own test)")
    args = parser.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} is not empty: name a new folder, or remove that one")
    travel = checkout_bytes()
    part_bytes = int(args.part_mib * MIB) if args.part_mib else min(
        PART_CAP_BYTES, DEVICE_CARRY_BYTES - travel - MIB)
    if not 1 <= args.bench_cases <= tracing.BENCH_CASES:
        parser.error(f"--bench-cases {args.bench_cases}: give 1 to {tracing.BENCH_CASES}")
    if args.wheel is not None and not (args.wheel.is_file() and args.wheel.name.startswith("pytest_libero-")
                                       and args.wheel.suffix == ".whl"):
        parser.error(f"--wheel {args.wheel}: name a pytest_libero-*.whl file")
    if not 0 <= args.xz_preset <= 9:
        parser.error(f"--xz-preset {args.xz_preset}: give 0 to 9")
    parts = build(args.out.resolve(), part_bytes, args.traces, args.bench_cases,
                  args.wheel and args.wheel.resolve(), args.xz_preset)
    print(f"device bundle: {len(parts)} part(s) in {args.out} (at most {part_bytes / MIB:.1f} MiB each; "
          f"the checkout's own files add {travel / MIB:.1f} MiB to every call):")
    for part in parts:
        size = sum(p.stat().st_size for p in part.iterdir())
        print(f"  {part.name}: {size / MIB:.1f} MiB   run: bash {args.out}/{part.name}/run.sh "
              f"(carry {args.out}/{part.name})")
    manifest = json.loads((parts[0] / packing.MANIFEST).read_text(encoding="utf-8"))
    print(f"  {len(manifest['files'])} files, archive sha256 {manifest['archive']['sha256'][:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
