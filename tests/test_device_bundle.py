"""The offline device bundle, built and run as a GPU machine runs it (issue 59).

``python -m release.device_bundle`` traces the benchmark's and the demo's real runs,
stages and packs the bundle (the session's own wheel, packed at xz's fastest preset);
meanwhile a fresh Python 3.12 venv is made (with uv) holding only packages the GPU image has
(``gpu_image.txt``: numpy, pytest, scipy, ...; never the simulator). With pip cut off
from any index and HOME and caches empty, that venv runs each part's ``run.sh`` in turn
from a folder outside the checkout, the last under strace: the demo's five cases pass
(their video a frame every 5 controls), ``bench/gpu_throughput.py --allow-cpu`` runs real
cases, and no file outside the bundle, the venv and the system is read (nothing of the
checkout, its venv or this HOME).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from installs import ROOT, Artifacts, interpreter, uv_install, uv_venv
from venvs import clean_env, run

from release.device_bundle.__main__ import DEVICE_CARRY_BYTES, checkout_bytes
from release.device_bundle.dependencies import carried, closure, requirements_of
from release.device_bundle.image import PROVIDED_BY, canonical, image_packages
from release.device_bundle.tracing import read_files

pytestmark = [pytest.mark.install, pytest.mark.simulator]
BUILD_TIMEOUT_S = 1800.0
RUN_TIMEOUT_S = 1500.0


@dataclass(frozen=True)
class Arrival:
    parts: list[Path]
    calls: list[subprocess.CompletedProcess[str]]
    out: Path
    opened: set[Path]
    venv: Path
    base: Path
    dest: Path


def image_requirements() -> list[str]:
    """The image's packages pytest-libero needs, each with every version bound the
    closure puts on it (an opencv below 5 for LIBERO, a numpy below 3), and setuptools,
    which the image has and imageio-ffmpeg 0.5.1 names."""
    needed = closure()
    wanted = {name for name in needed if name not in carried(needed, image_packages())}
    bounds: dict[str, list[str]] = {PROVIDED_BY.get(name, name): [] for name in wanted}
    for name in needed:
        for requirement in requirements_of(name):
            key = canonical(requirement.name)
            if key in wanted and str(requirement.specifier):
                bounds[PROVIDED_BY.get(key, key)].append(str(requirement.specifier))
    return ["setuptools", *(name + ",".join(sorted(set(specs))) for name, specs in sorted(bounds.items()))]


def image_only_venv(venv: Path, base: Path) -> None:
    """A 3.12 venv holding the image's packages that pytest-libero needs, nothing else
    (made with uv: the bundle only reads it, and pip spent half a minute of CPU beside
    the build)."""
    uv_venv(venv, base, seed=True)
    uv_install(venv / "bin" / "python", *image_requirements(), timeout=900,
               what="installing the GPU image's packages (needs the package index)")


def built_beside_the_venv(bundle: Path, wheel: Path, venv: Path, base: Path) -> list[Path]:
    """The bundle's parts, built while the image-only venv is made in a thread (the build
    is mostly the traced runs and xz, the venv mostly pip)."""
    with ThreadPoolExecutor(1) as pool:
        made = pool.submit(image_only_venv, venv, base)
        # The arrival runs the benchmark's --smoke (one task): two traced tasks carry what it
        # opens, and parts of at most 40 MiB keep the bundle in several parts, as the full one is.
        run([sys.executable, "-m", "release.device_bundle", str(bundle), "--bench-cases", "2",
             "--part-mib", "40", "--wheel", str(wheel), "--xz-preset", "0"], BUILD_TIMEOUT_S,
            "building the device bundle (needs strace, the package index and Debian's)", cwd=ROOT)
        made.result()
    return sorted(bundle.glob("part-*"))


@pytest.fixture(scope="module")
def arrival(artifacts: Artifacts, tmp_path_factory: pytest.TempPathFactory) -> Arrival:
    if shutil.which("strace") is None:
        pytest.skip("no strace (apt-get install strace): the builder traces the files real runs open")
    base = interpreter("3.12")
    if base is None:
        pytest.skip("no Python 3.12 here (pyenv install 3.12): the GPU machines run 3.12")
    work = tmp_path_factory.mktemp("device")
    venv = work / "venv"
    parts = built_beside_the_venv(work / "bundle", artifacts.wheel, venv, base)
    home, elsewhere, out = work / "home", work / "elsewhere", work / "out"
    for folder in (home, elsewhere):
        folder.mkdir()
    env = clean_env(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PIP_NO_INDEX="1",
                    PIP_CONFIG_FILE=os.devnull, OUT=str(out),
                    PYTEST_LIBERO_BUNDLE_DEST=str(work / "dest"),
                    PYTEST_LIBERO_BUNDLE_PYTHON=str(venv / "bin" / "python"),
                    PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
    trace = work / "run.strace"
    calls = []
    for n, part in enumerate(parts, 1):
        last = n == len(parts)
        # The demo's video a frame every 5 controls: its verdicts are the physics', not the video's.
        command = ["bash", str(part / "run.sh"), *(["--smoke", "--video-stride", "5"] if last else [])]
        if last:
            command = ["strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=%file",
                       "-o", str(trace), *command]
        calls.append(subprocess.run(command, cwd=elsewhere, env=env, capture_output=True, text=True,
                                    timeout=RUN_TIMEOUT_S, check=False))
    return Arrival(parts, calls, out, read_files([trace]), venv, base, work / "dest")


def test_each_part_fits_one_device_call_with_the_checkout(arrival: Arrival) -> None:
    travel = checkout_bytes()
    assert len(arrival.parts) >= 2, arrival.parts  # the calls after the first are proven too
    for part in arrival.parts:
        size = sum(p.stat().st_size for p in part.iterdir())
        assert size <= 60 << 20 and size + travel <= DEVICE_CARRY_BYTES, (part, size, travel)
    manifest = json.loads((arrival.parts[0] / "manifest.json").read_text())
    assert manifest["textures"], "large textures travel recompressed"
    assert sorted(p["name"] for p in manifest["parts"]) == [p.name for p in arrival.parts]


def test_the_bundle_runs_the_demo_and_the_benchmark_offline(arrival: Arrival) -> None:
    for call in arrival.calls[:-1]:
        assert call.returncode == 0 and "still to come" in call.stdout, call
    last = arrival.calls[-1]
    assert last.returncode == 0, f"{last.stdout[-4000:]}\n{last.stderr[-4000:]}"
    summary = json.loads((arrival.out / "summary.json").read_text())
    assert summary["demo"]["verdicts"] and set(summary["demo"]["verdicts"].values()) == {"success"}
    assert len(summary["demo"]["verdicts"]) == 5, summary["demo"]
    figures = json.loads((arrival.out / "bench.json").read_text())
    (run_,) = figures["runs"]
    assert run_["cases"] == 1 and run_["episodes_per_hour"] > 0
    (worker,) = run_["kept"].values()
    assert worker["renderer"] and worker["sha256"] and worker["egl_device"] is not None
    environment = (arrival.out / "environment.txt").read_text()
    assert "every requirement of the bundle's packages is met" in environment, environment
    assert len(list(arrival.out.iterdir())) <= 8, "at most 8 files come back from a device call"


def test_the_run_reads_nothing_outside_the_bundle_the_venv_and_the_system(arrival: Arrival) -> None:
    base_prefix = Path(subprocess.run([str(arrival.base), "-c", "import sys; print(sys.base_prefix)"],
                                      capture_output=True, text=True, check=True).stdout.strip())
    arrived = [p for p in arrival.opened if p.is_relative_to(arrival.dest / "bundle" / "assets")]
    assert any(p.suffix == ".png" for p in arrived), "the traced run read the restored textures"
    forbidden = [ROOT, Path(sys.prefix), Path.home()]
    read = [p for p in arrival.opened
            if any(p.is_relative_to(f) for f in forbidden) and not p.is_relative_to(base_prefix)]
    assert not read, f"{len(read)} files read from the checkout, its venv or HOME: {sorted(read)[:20]}"
