"""This checkout installed the way users install it: built artifacts in fresh venvs.

``python -m build`` makes the sdist and, from the sdist, the wheel (so the wheel proves
the sdist complete). Each artifact goes into a new venv made from a base interpreter
(nothing of the tests' own venv leaks in) with pip or uv, never editable; its commands
run from folders outside the checkout, in :func:`venvs.clean_env`. The interpreters
come from ``requires-python``: the admitted minor versions found on this machine (on
PATH or under pyenv), the missing ones named.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from venvs import clean_env, run

ROOT = Path(__file__).resolve().parents[1]
TRACER = Path(__file__).with_name("open_trace.py")
TRACE_MODULE = "_pytest_libero_open_trace"
CANDIDATE_MINORS = tuple(f"3.{minor}" for minor in range(8, 16))
"""The Python versions asked of ``requires-python``: every one it could admit today."""
INSTALL_TIMEOUT_S = 900.0
UV = Path(sys.executable).with_name("uv")
"""The tests' own uv (the test extra installs it beside this python)."""


@dataclass(frozen=True)
class Artifacts:
    wheel: Path
    sdist: Path


def build(outdir: Path) -> Artifacts:
    """The sdist and the wheel built from it, as ``python -m build`` makes them."""
    run([sys.executable, "-m", "build", "--outdir", str(outdir), str(ROOT)], 600,
        "python -m build (needs the package index for hatchling)", cwd=outdir)
    return found(outdir)


def found(outdir: Path) -> Artifacts:
    """The one sdist and the one wheel in ``outdir``."""
    wheels, sdists = sorted(outdir.glob("*.whl")), sorted(outdir.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(outdir.iterdir())
    return Artifacts(wheels[0], sdists[0])


def requires_python() -> SpecifierSet:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return SpecifierSet(project["requires-python"])


def admitted_minors() -> list[str]:
    return [minor for minor in CANDIDATE_MINORS if f"{minor}.0" in requires_python()]


def refused_minors() -> list[str]:
    return [minor for minor in CANDIDATE_MINORS if minor not in admitted_minors()]


def interpreter(minor: str) -> Path | None:
    """A base interpreter of ``minor`` (e.g. "3.12") on this machine that runs and says
    it is that version (a pyenv shim on PATH may not), or None."""
    candidates: list[Path] = []
    if f"{sys.version_info.major}.{sys.version_info.minor}" == minor:
        candidates.append(Path(getattr(sys, "_base_executable", sys.executable)))
    candidates += sorted(Path.home().glob(f".pyenv/versions/{minor}.*/bin/python{minor}"),
                         key=lambda p: [int(n) for n in re.findall(r"\d+", p.parent.parent.name)],
                         reverse=True)
    on_path = shutil.which(f"python{minor}")
    candidates += [Path(on_path)] if on_path else []
    for candidate in candidates:
        said = subprocess.run([str(candidate), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=60, env=clean_env(), check=False)
        if said.returncode == 0 and said.stdout.strip() == minor:
            return candidate
    return None


@dataclass(frozen=True)
class Installed:
    """A venv with an artifact installed in it."""

    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def command(self, name: str) -> Path:
        return self.venv / "bin" / name

    def site_packages(self) -> Path:
        done = run([str(self.python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                   60, "asking the venv for its site-packages")
        return Path(done.stdout.strip())

    def package_dir(self) -> Path:
        return self.site_packages() / "pytest_libero"

    def record(self) -> set[str]:
        """The installed files pip or uv listed in RECORD, relative to site-packages."""
        records = list(self.site_packages().glob("pytest_libero-*.dist-info/RECORD"))
        assert len(records) == 1, records
        return {line.split(",")[0] for line in records[0].read_text().splitlines() if line}

    def trace_opens(self) -> None:
        """Install :mod:`open_trace` in the venv: every Python process of it starts it."""
        site = self.site_packages()
        shutil.copyfile(TRACER, site / f"{TRACE_MODULE}.py")
        (site / f"{TRACE_MODULE}.pth").write_text(f"import {TRACE_MODULE}\n")


def install(artifact: Path, venv: Path, base: Path, *, installer: str = "pip") -> Installed:
    """``artifact`` installed (not editable) into a new venv at ``venv`` made from the
    base interpreter ``base``, with ``installer`` (pip, or uv: ``uv venv`` and
    ``uv pip install``, uv being the tests' own)."""
    if installer == "pip":
        run([str(base), "-m", "venv", str(venv)], 180, f"creating a venv with {base}")
        run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(artifact)],
            INSTALL_TIMEOUT_S, f"pip install {artifact.name} (needs the package index)")
    elif installer == "uv":
        uv_venv(venv, base)
        uv_install(venv / "bin" / "python", str(artifact), timeout=INSTALL_TIMEOUT_S,
                   what=f"uv pip install {artifact.name} (needs the package index)")
    else:
        raise ValueError(f"installer {installer!r}: pip or uv")
    installed = Installed(venv)
    where = run([str(installed.python), "-c", "import pytest_libero; print(pytest_libero.__file__)"],
                120, "importing the installed pytest_libero", cwd=venv)
    assert where.stdout.strip().startswith(str(venv)), f"not the install: {where.stdout}"
    return installed


def uv_venv(venv: Path, base: Path, *, seed: bool = False, timeout: float = 180) -> None:
    """A new venv at ``venv`` made by uv from the base interpreter ``base`` (``seed``:
    with pip in it)."""
    run([str(UV), "venv", "--quiet", *(["--seed"] if seed else []), "--python", str(base), str(venv)],
        timeout, f"uv venv with {base}")


def uv_install(python: Path, *args: str, timeout: float, what: str) -> None:
    """``uv pip install args`` into the venv of ``python``; ``what`` names it if it fails."""
    run([str(UV), "pip", "install", "--quiet", "--python", str(python), *args], timeout, what)


def in_work(installed: Installed, work: Path, args: list[str], *, timeout: float = 900,
            **env: str) -> subprocess.CompletedProcess[str]:
    """``args`` (a command of the venv's bin folder and its arguments, or ``-m ...`` for
    its python) run in ``work``, to the end; never raises on a non-zero exit."""
    head = [str(installed.python)] if args[0] == "-m" else [str(installed.command(args[0]))]
    tail = args if args[0] == "-m" else args[1:]
    return subprocess.run([*head, *tail], cwd=work, env=clean_env(**env), capture_output=True,
                          text=True, timeout=timeout, check=False)


def traced(trace: Path) -> Iterator[Path]:
    """The paths the traced processes opened, each once."""
    seen: set[str] = set()
    for log in sorted(trace.glob("opens.*")):
        seen.update(log.read_text(encoding="utf-8", errors="surrogateescape").splitlines())
    yield from (Path(path) for path in sorted(seen))
