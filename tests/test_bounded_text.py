"""A foreign text (a server's error, a traceback) is cut wherever it is shown or recorded,
and kept whole once, in the case folder's error.txt."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from pytest_libero.episode.case import keep_full_error_text
from pytest_libero.episode.loop import TRACEBACK_LIMIT, error_record
from pytest_libero.episode.record import CaseRecord
from pytest_libero.policy.errors import ServerError
from pytest_libero.protocol.text import MESSAGE_LIMIT, clipped


def test_clipped_says_how_much_was_cut() -> None:
    assert clipped("abc") == "abc"
    assert clipped("x" * 10, limit=4) == "xxxx... [6 more characters]"


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001 - a traceback to record
        return caught


def test_a_huge_server_error_is_cut_in_the_record_and_kept_whole_in_error_txt(
    tmp_path: Path,
) -> None:
    text = "CUDA says " + "x" * 2_000_000
    error = error_record(raised(ServerError(f"the server answered: {text}", traceback=text)))
    assert len(error["message"]) < MESSAGE_LIMIT + 50 and "more characters]" in error["message"]
    assert len(error["traceback"]) < TRACEBACK_LIMIT + 50
    record = cast(CaseRecord, {"error": error})
    keep_full_error_text(record, tmp_path)
    kept = (tmp_path / "error.txt").read_text()
    assert kept.count(text) == 2  # the exception's own text and the server's, once each
    assert record["error"] is not None and "full_text" not in record["error"]
    assert record["error"]["full_text_file"] == "error.txt"


def test_a_short_error_keeps_no_file(tmp_path: Path) -> None:
    error: Any = error_record(raised(ValueError("short")))
    assert "full_text" not in error and error["message"] == "short"
    record = cast(CaseRecord, {"error": error})
    keep_full_error_text(record, tmp_path)
    assert not (tmp_path / "error.txt").exists() and "full_text_file" not in error
