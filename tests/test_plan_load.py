"""``plan`` says when other work holds the cores (issue 61, part 3: the plan cannot see
load, but it can see today's); read from a given /proc/loadavg."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_libero.planning.load import busy_line


@pytest.mark.parametrize(("text", "cores", "busy"), [
    ("3.20 2.10 1.00 4/300 12345\n", 2, True),
    ("1.00 0.50 0.20 2/300 12345\n", 2, True),  # one other process on two cores
    ("0.40 0.50 0.20 1/300 12345\n", 2, False),
    ("3.00 1.00 1.00 1/300 12345\n", 16, False),
    ("8.00 1.00 1.00 1/300 12345\n", 16, True),
    ("nan 1 1 1/3 1\n", 2, False),
    ("", 2, False),
    ("\xff\xfe", 2, False),
], ids=["loaded", "one-more", "quiet", "many-cores", "many-cores-loaded", "nan", "empty", "binary"])
def test_a_busy_machine_is_one_line_with_its_load(text: str, cores: int, busy: bool, tmp_path: Path) -> None:
    loadavg = tmp_path / "loadavg"
    loadavg.write_bytes(text.encode("latin-1"))
    said = busy_line(cores, loadavg)
    if not busy:
        assert said is None, said
        return
    assert said is not None and "\n" not in said
    assert said.startswith(f"this machine is busy (1-minute load {float(text.split()[0]):.1f} on {cores} "
                           "cores)") and "plan again when it is quiet" in said, said


def test_no_load_to_read_says_nothing(tmp_path: Path) -> None:
    assert busy_line(2, tmp_path / "absent") is None
