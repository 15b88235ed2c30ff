"""The one writer, reader and tail (files.py), and resuming after a killed writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.files import CorruptLine, read_jsonl, tail, tail_of, write_json_atomic
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.folder import RunFolder
from pytest_libero.results.layout import read_results


def test_a_torn_last_line_is_ignored_and_any_other_bad_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"b": 2}\n{"c": ')
    assert list(read_jsonl(path)) == [{"a": 1}, {"b": 2}]
    path.write_text('{"a": 1}\nnot json\n{"c": 3}\n')
    with pytest.raises(CorruptLine, match=r"x\.jsonl:2: not a JSON line"):
        list(read_jsonl(path))


def test_damaged_results_are_a_setup_error_naming_the_line(tmp_path: Path) -> None:
    good = '{"case": "a", "outcome": "success", "entry": {"suite": "libero_10"}}'
    (tmp_path / "results.jsonl").write_text(good + '\n{oops}\n\n')
    with pytest.raises(SetupError, match=r"results\.jsonl:2: .*damaged beyond a torn last line"):
        read_results(tmp_path)


def test_atomic_json_replaces_whole_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    write_json_atomic(target, {"b": 1, "a": [1, 2]})
    write_json_atomic(target, {"c": 3})
    assert json.loads(target.read_text()) == {"c": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_tails() -> None:
    assert tail("\n".join(map(str, range(50))), 3) == "47\n48\n49"
    assert tail("", 3) == "(no output)"
    assert tail_of(Path("/nonexistent/log")) == "(no output captured)"


def test_resuming_after_a_torn_line_keeps_every_record_and_the_fragment(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    first = {"case": "libero_10-00", "outcome": "failure", "entry": {"suite": "libero_10"}}
    (tmp_path / "results.jsonl").write_text(json.dumps(first) + '\n{"case": "libero_10-0')
    folder = RunFolder(tmp_path, resume=True)
    second: Any = {"case": "libero_10-01", "outcome": "success", "entry": {"suite": "libero_10"}}
    folder.append_result(second)
    folder.close()
    assert [r["case"] for r in read_results(tmp_path)] == ["libero_10-00", "libero_10-01"]
    assert (tmp_path / "results.jsonl.torn-1").read_text() == '{"case": "libero_10-0'
