"""``pytest-libero export RUN --lerobot OUT`` refuses an OUT it must not or cannot write, in
one line, before lerobot is imported and before anything is written (issue 49, classes H6
and H7): OUT inside the run folder (the dataset would sit in the evidence), under a
regular file, on /proc, under a folder this user cannot write to.

The run folder is a real one written without the simulator (tests/scripted_runs.py);
lerobot is not needed, since every refusal comes before it would be imported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runs import in_process, own_process
from scripted_runs import make_run

from harness.hostile import Hostile


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder, _ = make_run(tmp_path_factory.mktemp("run"))
    return folder


def inside_the_run(run: Path, where: Path) -> Path:
    return run / "cases" / "dataset"


def under_a_file(run: Path, where: Path) -> Path:
    (where / "notes.txt").write_text("a regular file")
    return where / "notes.txt" / "dataset"


def on_proc(run: Path, where: Path) -> Path:
    return Path("/proc/pytest-libero-export/dataset")


def under_a_read_only_folder(run: Path, where: Path) -> Path:
    shelf = where / "read-only"
    shelf.mkdir()
    shelf.chmod(0o555)
    return shelf / "new" / "dataset"


ROWS: list[tuple[Callable[[Path, Path], Path], int, str, str, bool]] = [
    (inside_the_run, 6, "OUT inside the run folder (`RUN/cases/dataset`)",
     "lies inside {run}, the run being exported; an export never writes into the evidence it "
     "reads: name a folder outside it", False),
    (under_a_file, 7, "OUT under a regular file", "cannot make {out} ({file} is a file, not a "
     "folder); name a new folder where this user can write", False),
    (on_proc, 7, "OUT on /proc", "cannot make {out} (No such file or directory); name a new folder "
     "where this user can write", False),
    (under_a_read_only_folder, 7, "OUT under a folder this user cannot write to (root without "
     "its capabilities)", "cannot make {out} (Permission denied); name a new folder where this "
     "user can write", True),
]


@pytest.mark.parametrize(("target", "said", "unprivileged"), [
    pytest.param(target, said, unprivileged, id=target.__name__)
    for target, _, _, said, unprivileged in ROWS])
def test_export_refuses_an_out_it_must_not_or_cannot_write(
        target: Callable[[Path, Path], Path], said: str, unprivileged: bool, run_dir: Path,
        tmp_path: Path) -> None:
    out = target(run_dir, tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    args = ["export", str(run_dir), "--lerobot", str(out)]
    code, stdout, stderr = own_process(args, unprivileged=True) if unprivileged else in_process(args)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, (code, stdout, stderr)
    said = said.format(run=run_dir, out=out, file=out.parent)
    expected = f"{out} {said}" if "lies inside" in said else said
    assert lines[0] == f"pytest-libero export: {expected}", lines[0]
    assert "Traceback" not in stderr and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing left behind
    assert not (run_dir / "cases" / "dataset").exists()


HOSTILE: list[Hostile] = [
    Hostile(klass, tried, f'exit 2, nothing written, lerobot not imported: "pytest-libero export: '
            f'{"OUT " if "{run}" in said else ""}{said.format(run="RUN", out="OUT", file="FILE")}"',
            "tests/test_hostile_export.py::test_export_refuses_an_out_it_must_not_or_cannot_write"
            f"[{target.__name__}]")
    for target, klass, tried, said, _ in ROWS
]
