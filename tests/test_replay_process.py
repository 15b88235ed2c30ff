"""verify's re-executing process, without a simulator: however it ends without an answer
(it raised, or it died), that case is NOT VERIFIABLE with the reason and the end of what
the process printed; and where no forkserver's socket fits the temporary folder, the
replays are spawned instead of refused."""

from __future__ import annotations

import multiprocessing
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_libero.audit import verify
from pytest_libero.audit.compare import NOT_VERIFIABLE
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.evidence.layout import INDEX_NAME

ADAPTERS = {
    "raising_adapter": "def make():\n    print('building the adapter', flush=True)\n"
                       "    raise RuntimeError('no simulator here')\n",
    "dying_adapter": "import os\nprint('about to leave', flush=True)\nos._exit(7)\n",
}


@pytest.fixture
def case_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A case folder that delivered nothing, and the two adapters on the path (a spawned
    process gets this process's sys.path)."""
    for name, source in ADAPTERS.items():
        (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = tmp_path / "case"
    folder.mkdir()
    (folder / INDEX_NAME).write_text("")
    return folder


def replayed(case_dir: Path, adapter: str) -> Any:
    record: Any = {"case": "libero_10-00", "budget": {"control_cap": 3}}
    read: Any = SimpleNamespace(adapter=adapter, kinds=())
    return verify._in_fresh_process(record, case_dir, read, False, multiprocessing.get_context("spawn"))


def test_an_exception_in_the_replay_is_the_case_s_reason(case_dir: Path) -> None:
    verdict = replayed(case_dir, "raising_adapter:make")
    assert verdict.case == "libero_10-00" and verdict.status == NOT_VERIFIABLE
    assert verdict.reason.startswith("re-execution failed: RuntimeError: no simulator here; "
                                     "its output ends:\n"), verdict.reason
    assert "building the adapter" in verdict.reason


def test_a_replay_process_that_dies_is_named_with_its_exit_code(case_dir: Path) -> None:
    verdict = replayed(case_dir, "dying_adapter:make")
    assert verdict.status == NOT_VERIFIABLE
    assert verdict.reason.startswith("re-execution failed: the re-executing process died "
                                     "(exit code 7); its output ends:\n"), verdict.reason
    assert "about to leave" in verdict.reason


def test_a_temporary_folder_too_long_for_the_socket_spawns_the_replays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long = tmp_path / ("x" * 100)
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    monkeypatch.setattr(verify, "measure_in_child", lambda context=None: {"measured_in": context})
    entry = load_catalog().suite_entries("libero_10")[0]
    context, here = verify.replay_host(entry)
    assert context.get_start_method() == "spawn" and here == {"measured_in": None}
