"""Which distributions the bundle carries, and getting them as cp312 wheels.

The run-time closure of pytest-libero is read from the environment the builder runs in
(where the project is installed and tested), evaluated for the GPU machine: CPython
3.12 on x86-64 Linux, no extras. Of that closure the bundle carries what the image
lacks, at the version installed and tested here. A pure-Python one is copied from this
environment, file by file (robosuite's and LIBERO's assets filtered by the trace,
``tracing.py``): its files are the same under any Python 3, and some (bddl) publish no
wheel. One with compiled code is downloaded as a wheel for CPython 3.12.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement

from release.device_bundle.image import canonical, provided

ROOT_DISTRIBUTION = "pytest-libero"
TARGET_MARKERS = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
                  "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
                  "implementation_name": "cpython", "platform_python_implementation": "CPython",
                  "extra": ""}
"""The marker environment of the GPU machines' Python (KINDS.md: 3.12.3, x86-64)."""
PINNED = {"imageio-ffmpeg": "0.5.1"}
"""Versions that differ from this environment's on purpose: 0.5.1 ships ffmpeg 4.2.2 in
~19 MiB compressed; 0.8's wheel is 68 MB."""
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux2010_x86_64",
             "manylinux1_x86_64", "linux_x86_64")


def closure(root: str = ROOT_DISTRIBUTION) -> dict[str, str]:
    """Every distribution ``root`` needs at run time on the GPU machine, with the version
    installed here: canonical name -> version."""
    found: dict[str, str] = {}
    pending = [root]
    while pending:
        name = canonical(pending.pop())
        if name in found:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError as exc:
            raise SystemExit(f"device bundle: {name} is needed but not installed here; install "
                             f"the project with its dependencies first (pip install -e .)") from exc
        found[name] = dist.version
        pending += [requirement.name for requirement in requirements_of(name)]
    return found


def requirements_of(name: str) -> list[Requirement]:
    """An installed distribution's run-time requirements on the GPU machine (markers
    evaluated there, no extras)."""
    found = [Requirement(line) for line in distribution(name).requires or []]
    return [r for r in found if r.marker is None or r.marker.evaluate(TARGET_MARKERS)]


def carried(needed: dict[str, str], image: dict[str, str | None]) -> dict[str, str]:
    """Of ``needed``, what the bundle must bring: missing from the image, or pinned."""
    return {name: PINNED.get(name, version) for name, version in sorted(needed.items())
            if name == canonical(ROOT_DISTRIBUTION) or name in PINNED or not provided(name, image)}


def is_pure(name: str) -> bool:
    """Whether the installed distribution is pure Python (its WHEEL says so), so that its
    files serve CPython 3.12 as they are."""
    text = distribution(name).read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]
    return "Root-Is-Purelib: true" in text and bool(tags) and all(t.endswith("-none-any") for t in tags)


def download_wheels(wanted: dict[str, str], into: Path) -> list[Path]:
    """The cp312 x86-64 wheel (or a pure one) of each ``name==version``, from the index."""
    into.mkdir(parents=True, exist_ok=True)
    platforms = [flag for platform in PLATFORMS for flag in ("--platform", platform)]
    specs = [f"{name}=={version}" for name, version in wanted.items()]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                    "--abi", "cp312", "--abi", "abi3", "--abi", "none", *platforms,
                    "--dest", str(into), *specs], check=True)
    wheels = sorted(into.glob("*.whl"))
    names = {canonical(w.name.split("-")[0]) for w in wheels}
    missing = sorted(set(wanted) - names)
    if missing:
        raise SystemExit(f"device bundle: no cp312 wheel was downloaded for {', '.join(missing)}")
    return wheels


def unpack_wheel(wheel: Path, site: Path) -> None:
    """A wheel's files as an install would place its library part: ``*.data/purelib``
    and ``platlib`` at the top, scripts and headers left out (nothing there runs them)."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            parts = member.filename.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            target = site.joinpath(*parts)
            if member.is_dir():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(member))
            mode = (member.external_attr >> 16) & 0o777
            if mode:
                target.chmod(mode)
