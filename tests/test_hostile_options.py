"""Option values, round 3 (issue 40): every option's answer quotes its value at most once
and short (class 13), and the message nits (class 14).

Each option is given a value of 120,000 characters (past the bound no option reads, the
cap in ``config/options.py``) and one of 2,000 (under it, so that its own reader answers),
in-process through pytester; the answer must be one line quoting at most forty of the
value's characters, once (``protocol.text.echo``). The value begins with ``A`` and ends
with ``Z`` so that its head and tail can be counted apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from openpi_reference_server import OpenpiReferenceServer

from harness.hostile import Hostile
from pytest_libero import session
from pytest_libero.config.options import MAX_VALUE_CHARS, OPTIONS
from pytest_libero.evidence.renderer import not_measured
from pytest_libero.perturb import registry
from pytest_libero.policy.errors import ServerError
from pytest_libero.policy.openpi.client import WebsocketPolicyClient
from pytest_libero.protocol.text import ECHO_LIMIT

pytest_plugins = ["pytester"]

DOCS = Path(__file__).resolve().parents[1] / "docs"
HEAD = "A" + "x" * (ECHO_LIMIT // 2 - 1)
"""What the echo of the value shows first; the value holds it once."""
TAIL = "x" * (ECHO_LIMIT // 2 - 1) + "Z"
LONGEST_LINE = 400
"""The most characters an answer about a value may take."""


def value(length: int) -> str:
    return "A" + "x" * (length - 2) + "Z"


def argv(name: str, text: str) -> list[str]:
    """The command line giving option ``name`` the value ``text`` (and a profile)."""
    profile = "--libero-profile=pi0" if name == "endpoint" else "--libero-profile=zero"
    if name == "profile":
        return [f"--libero-profile={text}"]
    if name == "policy-option":
        return [profile, f"--libero-policy-option=chunk={text}"]
    if name == "policy-option-key":
        return [profile, f"--libero-policy-option={text}=1"]
    return [profile, f"--libero-{name}={text}"]


NAMES = [option.name for option in OPTIONS] + ["policy-option-key"]
ECHO_TEST = "tests/test_hostile_options.py::test_every_option_quotes_a_long_value_once_and_short"
LENGTHS = {
    "120000": Hostile(13, f"each of the {len(OPTIONS)} options (and a policy option's key) "
                      "given 120,000 characters: 17 of them echoed it whole, "
                      "--libero-perturb and --libero-ood-kind twice, --libero-profile ended in "
                      "INTERNALERROR",
                      "one line, exit 4: \"--libero-scope='Axxxxxxxxxxxxxxxxxxx…xxxxxxxxxxxxxxxxxxxZ' "
                      f"(120000 characters) is longer than any value it takes (at most "
                      f"{MAX_VALUE_CHARS} characters)\": no option reads more",
                      f"{ECHO_TEST}[120000]"),
    "2000": Hostile(13, "each option given 2,000 characters, under that bound",
                    "its own reader's one line, the value quoted once in at most 40 of its "
                    "characters (`protocol.text.echo`), e.g. \"--libero-perturb='Axxx…xxxZ' "
                    "(2000 characters): cannot read it; write KIND:LEVEL...\"",
                    f"{ECHO_TEST}[2000]"),
}


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    """In-process runs that never render (a value that gets that far takes no fingerprint)."""
    monkeypatch.setattr(session, "measure_for_cases", lambda *_: not_measured("not measured here"))
    yield pytester


def answer(pytester: pytest.Pytester, args: list[str]) -> tuple[int, str]:
    result = pytester.runpytest_inprocess(f"--libero-results={pytester.path / 'r'}", *args)
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-2000:]
    lines = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(lines) == 1, text[-2000:]
    return int(result.ret), lines[0]


@pytest.mark.parametrize("length", list(LENGTHS))
def test_every_option_quotes_a_long_value_once_and_short(run: pytest.Pytester, length: str) -> None:
    text = value(int(length))
    for name in NAMES:  # bounded: the option table
        code, line = answer(run, argv(name, text))
        assert code == pytest.ExitCode.USAGE_ERROR, (name, line)
        assert len(line) <= LONGEST_LINE, (name, line)
        assert line.count(HEAD) <= 1 and line.count(TAIL) <= 1, (name, line)  # once at most
        assert "x" * ECHO_LIMIT not in line, (name, line)
        assert not (run.path / "r").exists(), name


INI_TEST = "tests/test_hostile_options.py::test_a_long_value_in_the_ini_file_is_quoted_once_and_short"


def test_a_long_value_in_the_ini_file_is_quoted_once_and_short(run: pytest.Pytester) -> None:
    run.makeini(f"[pytest]\nlibero_scope = {value(120_000)}\nlibero_suite = {value(2_000)}\n")
    code, line = answer(run, ["--libero-profile=zero"])
    assert code == pytest.ExitCode.USAGE_ERROR and line.count(HEAD) == 1 and len(line) <= LONGEST_LINE


PATH_TEST = "tests/test_hostile_options.py::test_a_path_no_file_system_holds_is_one_line"


@pytest.mark.parametrize("name", ["profile", "resume", "baseline", "results"])
def test_a_path_no_file_system_holds_is_one_line(run: pytest.Pytester, name: str) -> None:
    path = f"{run.path}/{'n' * 300}.toml"  # a name past NAME_MAX: the OS refuses to open it
    code, line = answer(run, argv(name, path))
    assert code == pytest.ExitCode.USAGE_ERROR and len(line) <= LONGEST_LINE, line
    assert line.startswith(f"ERROR: --libero-{name}"), line


# ------------------------------------------------------------------ class 14: messages

SUITE_TEST = "tests/test_hostile_options.py::test_suite_names_are_trimmed_like_every_list_option"


@pytest.mark.parametrize("suites, scope, more", [
    (" libero_10 ", "task_coverage", "--libero-perturb= camera:1 "),
    ("libero_goal_task, libero_goal_swap", "ood",
     "--libero-ood-kind= object, position , semantic,environment "),
], ids=["task_coverage", "ood"])
def test_suite_names_are_trimmed_like_every_list_option(run: pytest.Pytester, suites: str,
                                                        scope: str, more: str) -> None:
    result = run.runpytest_inprocess("--libero-profile=zero", f"--libero-scope={scope}",
                                     f"--libero-suite={suites}", "--libero-task-ids=0", more,
                                     "--co", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    collected = [line for line in result.stdout.lines if "test_libero_task[" in line]
    names = [name.strip() for name in suites.split(",")]
    assert collected and all(any(f"[{n}-00" in line for line in collected) for n in names)


TEXT_FRAME_TEST = "tests/test_hostile_options.py::test_a_server_traceback_states_its_exception_once"


def test_a_server_traceback_states_its_exception_once() -> None:
    def raises(obs: object) -> dict[str, object]:
        raise ValueError("the model fell over")

    with OpenpiReferenceServer(raises) as server:
        with WebsocketPolicyClient(server.uri, connect_timeout=10.0, call_timeout=30.0) as client:
            client.connect()
            with pytest.raises(ServerError) as raised:
                client.infer({"prompt": "x", "image": np.zeros((2, 2, 3), np.uint8)})
    message = str(raised.value)
    first, *rest = message.splitlines()
    assert first.endswith("raised while answering: ValueError: the model fell over"), message
    assert message.count("ValueError: the model fell over") == 1, message
    assert rest and rest[0].startswith("Traceback (most recent call last):"), message
    assert raised.value.traceback.rstrip().endswith("ValueError: the model fell over")


DOCS_TEST = "tests/test_hostile_options.py::test_docs_options_names_every_option_and_every_kind"


def test_docs_options_names_every_option_and_every_kind() -> None:
    doc = (DOCS / "options.md").read_text(encoding="utf-8")
    missing = [option.flag for option in OPTIONS if f"`{option.flag}" not in doc]
    assert not missing, missing
    [row] = [line for line in doc.splitlines() if line.startswith("| `--libero-perturb`")]
    assert all(f"`{kind}`" in row for kind in registry.names()), row


HOSTILE: list[Hostile] = [
    *LENGTHS.values(),
    Hostile(13, "a 120 kB --libero-scope and a 2,000-character --libero-suite in the ini file",
            "the same one line, the value quoted once", INI_TEST),
    Hostile(13, "--libero-profile, --libero-resume, --libero-baseline or --libero-results a "
            "path with a 300-character name (the profile's used to end in INTERNALERROR: "
            "File name too long)", "one line, exit 4, no traceback: \"--libero-resume=...: a "
            "name in it is longer than 255 bytes, more than a file system takes ...\"",
            f"{PATH_TEST}[resume]"),
    Hostile(14, "--libero-suite=' libero_10 ' and 'libero_goal_task, libero_goal_swap' (the "
            "suite was not trimmed, --libero-perturb was)", "read as the names, spaces dropped "
            "as every list option drops them", f"{SUITE_TEST}[ood]"),
    Hostile(14, "a server's traceback in a text frame (its exception line was said twice)",
            "the exception line once, first, then the traceback above it", TEXT_FRAME_TEST),
    Hostile(14, "docs/options.md's --libero-perturb kinds (position and environment were "
            "missing, --libero-kind had no row)", "every option and every registered kind named; "
            "a test fails when one is missing", DOCS_TEST),
]
