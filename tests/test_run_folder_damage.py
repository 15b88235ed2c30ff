"""One run folder, one owner: results/layout.py names its files and reads them for all.

Each of run.json, results.jsonl and summary.json is taken away, cut short, made not
JSON and given the wrong type in a copy of one real run folder (made once, by a run
that selects its one case and deselects it, so no episode runs). Every reader of that
file must then answer with the same one line, naming the file and the fix: ``merge``,
``merge --baseline``, ``verify`` and ``safety`` through ``cli.main``; ``--libero-resume``
and ``--libero-baseline`` through pytester; the Allure environment and the robustness
figure at a session's end. No traceback, and the damaged folder is left as it was.
A test below keeps the names owned: no other module spells them.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import cli_runs
import pytest
from cli_runs import Said

from harness.runs import run_folder, run_pytest, run_records
from pytest_libero import session
from pytest_libero.protocol.errors import SetupError
from pytest_libero.report.allure import AllureEnvironment
from pytest_libero.report.figures import write_figure
from pytest_libero.results import layout
from pytest_libero.results.layout import (
    FIGURE_NAME,
    RESULTS_NAME,
    RUN_NAME,
    SERVER_LOG_NAME,
    SUMMARY_NAME,
    VERIFY_NAME,
)

pytest_plugins = ["pytester"]

RUN_ARGS = ("--libero-profile=zero", "--libero-isolation=none", "--libero-scope=task_coverage",
            "--libero-suite=libero_10", "--libero-task-ids=0", "-k", "nothing_runs")
"""One selected case, deselected: the run writes its folder and runs no episode."""
RECORD = {"case": "libero_10-00", "outcome": "failure", "entry": {"suite": "libero_10"}}
COPY = "use the run folder as the run wrote it (copy it again)"
REMAKE = "copy it again, or let pytest-libero merge {folder} write it anew, in a new folder"
BEYOND = f"results.jsonl is damaged beyond a torn last line: {COPY}"


@dataclass(frozen=True)
class Damage:
    """One file made unusable one way, and the answer every reader of it must give."""

    file: str
    how: str
    content: bytes | None
    """What the file holds afterwards; None: it is taken away."""
    answer: str
    """``{where}`` is the folder as the command names it (``--option=FOLDER``),
    ``{folder}`` the folder itself."""

    @property
    def id(self) -> str:
        return f"{self.file}-{self.how}"


DAMAGES = (
    Damage(RUN_NAME, "missing", None,
           "{where}: not a run folder (no run.json); name the folder a run wrote, "
           "<results>/<profile>/<run id>"),
    Damage(RUN_NAME, "cut-short", b'{"plan": {"profile": ',
           "{where}: run.json is damaged, not JSON (Expecting value: line 1 column 22 (char 21)); "
           + COPY),
    Damage(RUN_NAME, "not-json", b"\xff\xfe not text\n",
           "{where}: run.json is damaged, not JSON ('utf-8' codec can't decode byte 0xff in "
           "position 0: invalid start byte); " + COPY),
    Damage(RUN_NAME, "wrong-type", b"[1, 2]\n",
           "{where}: run.json lacks protocol_identity, plan; it was not written by "
           "pytest-libero, or it is damaged: " + COPY),
    Damage(RESULTS_NAME, "missing", None,
           "{where} has no results.jsonl: not a run folder, or an incomplete copy of one (a run "
           "creates it before its first case); " + COPY),
    Damage(RESULTS_NAME, "not-json", b"{not json\n" + json.dumps(RECORD).encode() + b"\n",
           "{folder}/results.jsonl:1: not a JSON line (Expecting property name enclosed in "
           "double quotes: line 1 column 2 (char 1)); " + BEYOND),
    Damage(RESULTS_NAME, "wrong-type", json.dumps({**RECORD, "case": 7}).encode() + b"\n",
           "{folder}/results.jsonl:1: a record is not a pytest-libero case record: 'case' is a "
           "int; " + BEYOND),
    Damage(SUMMARY_NAME, "missing", None,
           "{where} has no summary.json: the run stopped before writing it; pytest-libero merge "
           "{folder} writes it anew, in a new folder"),
    Damage(SUMMARY_NAME, "cut-short", b'{"counts": {"selected": 1, ',
           "{where}: summary.json is damaged, not JSON (Expecting property name enclosed in "
           "double quotes: line 1 column 28 (char 27)); " + REMAKE),
    Damage(SUMMARY_NAME, "not-json", b"\xff\xfe not text\n",
           "{where}: summary.json is damaged, not JSON ('utf-8' codec can't decode byte 0xff in "
           "position 0: invalid start byte); " + REMAKE),
    Damage(SUMMARY_NAME, "wrong-type", b"[1, 2]\n",
           "{where}: summary.json is a list, not a table; " + REMAKE),
)
"""results.jsonl cut short is a killed writer's torn last line: read, not refused (below)."""


@pytest.fixture(scope="module")
def earlier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run folder (run.json, an empty results.jsonl, summary.json)."""
    root = tmp_path_factory.mktemp("earlier")
    done = run_pytest([*RUN_ARGS, f"--libero-results={root}", "--libero-run-id=earlier"], root,
                      timeout=300)
    assert done.returncode == 5, done.stdout + done.stderr  # everything deselected
    return run_folder(root, "zero")


def damaged_copy(earlier: Path, where: Path, damage: Damage) -> Path:
    folder = Path(shutil.copytree(earlier, where / damage.id))
    target = folder / damage.file
    if damage.content is None:
        target.unlink()
    else:
        target.write_bytes(damage.content)
    return folder


def tree(root: Path) -> dict[str, str]:
    """Every path under root, with each file's sha256."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "folder" for p in sorted(root.rglob("*"))}


def command(*argv: str) -> Said:
    """``pytest-libero ARGV`` in this process: exit code, stdout, stderr."""
    return cli_runs.in_process(argv)


@dataclass(frozen=True)
class Setting:
    """Where a reader meets the damage."""

    damage: Damage
    folder: Path
    """The damaged copy."""
    earlier: Path
    """The earlier run, whole (the folder merge --baseline merges)."""
    pytester: pytest.Pytester


@dataclass(frozen=True)
class Answer:
    """What a reader said of the damage."""

    code: int
    text: str
    """All the reader printed."""
    lines: list[str]
    """What it said of the damage: stderr's lines, or the warnings it issued."""
    folder: Path
    """The folder it read."""


Reader = Callable[[Setting], Answer]


def by_command(*argv: str) -> Reader:
    def read(at: Setting) -> Answer:
        args = [a.format(folder=at.folder, earlier=at.earlier, out=at.pytester.path / "merged")
                for a in argv]
        code, out, err = command(*args)
        return Answer(code, out + err, err.splitlines(), at.folder)
    return read


def by_pytest(option: str) -> Reader:
    def read(at: Setting) -> Answer:
        result = at.pytester.runpytest_inprocess(*RUN_ARGS, f"{option}={at.folder}")
        return Answer(int(result.ret), result.stdout.str() + result.stderr.str(),
                      result.stderr.lines, at.folder)
    return read


class EndOfSession:
    """What the session-end hooks use of pytest's session: --alluredir and warnings."""

    def __init__(self, alluredir: Path) -> None:
        self.config = self
        self.alluredir = alluredir
        self.warned: list[str] = []

    def getoption(self, name: str, default: Any = None) -> Any:
        return str(self.alluredir) if name == "allure_report_dir" else default

    def issue_config_time_warning(self, warning: Warning, stacklevel: int) -> None:
        self.warned.append(str(warning))


def allure_environment(at: Setting) -> Answer:
    end = EndOfSession(at.pytester.path / "allure-results")
    try:
        AllureEnvironment(at.folder).pytest_libero_run_finished(cast(pytest.Session, end))
    except Exception:  # noqa: BLE001 - a traceback at the session's end
        return Answer(1, traceback.format_exc(), [], at.folder)
    return Answer(0, "\n".join(end.warned), end.warned, at.folder)


def figure(at: Setting) -> Answer:
    try:
        write_figure(at.folder)
    except SetupError as exc:
        return Answer(2, str(exc), [str(exc)], at.folder)
    return Answer(0, "", [], at.folder)


def figure_at_session_end(at: Setting) -> Answer:
    """A live run whose summary.json is damaged once the recorder has written it."""
    live = at.pytester.path / "results" / "zero" / "live"
    at.pytester.makeconftest(f"""
        from pathlib import Path
        import pytest

        @pytest.hookimpl(wrapper=True)  # inside the figure's wrapper: after the recorder
        def pytest_sessionfinish(session):
            result = yield
            summary = Path({str(live / SUMMARY_NAME)!r})
            content = {at.damage.content!r}
            summary.unlink() if content is None else summary.write_bytes(content)
            return result
        """)
    result = at.pytester.runpytest_inprocess(
        *RUN_ARGS, f"--libero-results={at.pytester.path / 'results'}", "--libero-run-id=live")
    warned = [line.split("PytestWarning: ", 1)[1] for line in result.stdout.lines
              if "PytestWarning: " in line]
    return Answer(int(result.ret), result.stdout.str() + result.stderr.str(), warned, live)


@dataclass(frozen=True)
class Consumer:
    """One reader of run files, and how it frames the answer."""

    files: tuple[str, ...]
    read: Reader
    prefix: str
    """What it prints before the answer."""
    option: str = ""
    """The option that gave it the folder; an answer about the folder names it."""
    code: int = 2
    changes_nothing: bool = True


FOLDER_FILES = (RUN_NAME, RESULTS_NAME)
READERS = {
    "merge": Consumer(FOLDER_FILES, by_command("merge", "{folder}", "--out", "{out}"),
                      "pytest-libero merge: "),
    "merge-baseline": Consumer(FOLDER_FILES, by_command("merge", "{earlier}", "--out", "{out}",
                                                        "--baseline", "{folder}"),
                               "pytest-libero merge: ", "--baseline"),
    "verify": Consumer(FOLDER_FILES, by_command("verify", "{folder}"), "pytest-libero verify: "),
    "safety": Consumer(FOLDER_FILES, by_command("safety", "{folder}"), "pytest-libero safety: "),
    "resume": Consumer(FOLDER_FILES, by_pytest("--libero-resume"), "ERROR: ",
                       "--libero-resume", code=4),
    "baseline": Consumer(FOLDER_FILES, by_pytest("--libero-baseline"), "ERROR: ",
                         "--libero-baseline", code=4),
    "allure-environment": Consumer((RUN_NAME,), allure_environment,
                                   "pytest-libero: could not write the Allure environment: ",
                                   code=0),
    "figure": Consumer((SUMMARY_NAME,), figure, ""),
    "figure-at-session-end": Consumer(
        (SUMMARY_NAME,), figure_at_session_end, f"pytest-libero: could not draw {FIGURE_NAME}: ",
        code=pytest.ExitCode.NO_TESTS_COLLECTED, changes_nothing=False),
}


def cases() -> list[Any]:
    return [pytest.param(damage, reader, id=f"{damage.id}-{reader}")
            for damage in DAMAGES for reader, consumer in READERS.items()
            if damage.file in consumer.files]


@pytest.fixture
def renderer_of(earlier: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs take the earlier run's renderer instead of measuring one."""
    recorded = json.loads((earlier / RUN_NAME).read_text())["renderer"]
    monkeypatch.setattr(session, "measure_for_cases", lambda *_: recorded)


@pytest.mark.parametrize("damage, reader", cases())
@pytest.mark.usefixtures("renderer_of")
def test_every_reader_gives_a_damaged_file_the_same_one_line_answer(
    damage: Damage, reader: str, earlier: Path, pytester: pytest.Pytester, tmp_path: Path
) -> None:
    consumer = READERS[reader]
    folder = damaged_copy(earlier, tmp_path, damage)
    before = tree(tmp_path)
    found = consumer.read(Setting(damage, folder, earlier, pytester))
    assert "Traceback" not in found.text and "INTERNALERROR" not in found.text, found.text
    where = f"{consumer.option}={found.folder}" if consumer.option else str(found.folder)
    expected = consumer.prefix + damage.answer.format(where=where, folder=found.folder)
    assert [line for line in found.lines if line.strip()] == [expected], found.text
    assert found.code == consumer.code, found.text
    if consumer.changes_nothing:
        assert tree(tmp_path) == before, "a refused folder was changed"
    assert not (pytester.path / "merged").exists()  # merge refuses before it writes
    assert not (pytester.path / "libero-results").exists()  # no run folder was made


def test_the_table_reaches_every_reader_of_every_file() -> None:
    ids = [case.id for case in cases()]
    assert len(ids) == len(set(ids)) == 4 * 7 + 3 * 6 + 4 * 2
    for name in (RUN_NAME, RESULTS_NAME, SUMMARY_NAME):
        hows = {damage.how for damage in DAMAGES if damage.file == name}
        assert {"missing", "not-json", "wrong-type"} <= hows, name
        readers = [reader for reader, consumer in READERS.items() if name in consumer.files]
        assert readers, f"nothing reads {name}"


@pytest.mark.usefixtures("renderer_of")
def test_a_results_jsonl_cut_in_its_last_line_is_a_torn_line_to_every_reader(
    earlier: Path, pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """Cut short, results.jsonl is what a run killed mid-line leaves: that line is not a
    finished case, and no reader refuses the folder for it; a resume sets it aside."""
    fragment = json.dumps(RECORD).encode()[:30]
    folder = Path(shutil.copytree(earlier, tmp_path / "torn"))
    (folder / RESULTS_NAME).write_bytes(fragment)
    assert layout.read_results(folder) == [] and run_records(folder) == []
    code, out, err = command("merge", str(folder), "--out", str(tmp_path / "merged"))
    assert code == 0, out + err
    summary = json.loads((tmp_path / "merged" / SUMMARY_NAME).read_text())
    assert summary["counts"]["unattempted"] == 1
    for name in ("verify", "safety"):
        code, out, err = command(name, str(folder))
        assert (code, err.strip()) == (2, f"pytest-libero {name}: {folder} has no finished case"
                                          f"{' to verify' if name == 'verify' else ''} (its "
                                          "results.jsonl holds none: the run was stopped "
                                          "before its first case ended)"), out + err
    resumed = pytester.runpytest_inprocess(*RUN_ARGS, f"--libero-resume={folder}")
    assert resumed.ret == pytest.ExitCode.NO_TESTS_COLLECTED, resumed.stdout.str()
    assert (folder / f"{RESULTS_NAME}.torn-1").read_bytes() == fragment
    assert (folder / RESULTS_NAME).read_bytes() == b""


# --- the names are owned: only results/layout.py spells them -------------------------

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_libero"
OWNER = PACKAGE / "results" / "layout.py"
NAMES = (RUN_NAME, RESULTS_NAME, SUMMARY_NAME, SERVER_LOG_NAME, FIGURE_NAME, VERIFY_NAME)
READ_FILES = {"RUN_NAME", "RESULTS_NAME", "SUMMARY_NAME"}


def docstrings(tree: ast.AST) -> set[int]:
    """The string statements of a module, class or function: its docstrings and the
    attribute docstrings beside its names. Prose may name a file; code may not."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        for statement in body if isinstance(body, list) else []:
            if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
                    and isinstance(statement.value.value, str)):
                found.add(id(statement.value))
    return found


def spelled(source: str) -> list[str]:
    """Where code (not prose) spells a run folder's file name, joins ``"cases"`` onto a
    path, or parses a run file with json itself instead of through the layout's reader."""
    tree = ast.parse(source)
    prose = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in prose):
            found += [f"line {node.lineno}: {name}" for name in NAMES if name in node.value]
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
              and isinstance(node.right, ast.Constant) and node.right.value == "cases"):
            found.append(f"line {node.lineno}: / 'cases'")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("load", "loads") and isinstance(node.func.value, ast.Name)
              and node.func.value.id == "json"
              and any(isinstance(n, ast.Name) and n.id in READ_FILES
                      for arg in node.args for n in ast.walk(arg))):
            found.append(f"line {node.lineno}: json.{node.func.attr} of a run file")
    return found


def test_only_the_layout_module_spells_the_run_folder_s_names() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert OWNER in modules and len(modules) > 30
    assert len(spelled(OWNER.read_text(encoding="utf-8"))) >= len(NAMES)  # it owns them
    found = {str(path.relative_to(PACKAGE)): hits for path in modules if path != OWNER
             if (hits := spelled(path.read_text(encoding="utf-8")))}
    assert found == {}, "name run folder files through pytest_libero/results/layout.py"


@pytest.mark.parametrize("source, hits", [
    ('"""Writes run.json."""\nNAME = 1\n"""The summary.json key."""\n', []),
    ('path = folder / "summary.json"\n', ["line 1: summary.json"]),
    ('message = f"{folder}: results.jsonl holds {case}"\n', ["line 1: results.jsonl"]),
    ('case_dir = run_dir / "cases" / case\n', ["line 1: / 'cases'"]),
    ('run = json.loads((folder / RUN_NAME).read_text())\n', ["line 1: json.loads of a run file"]),
    ('table = json.loads(data_path(NAME).read_text())\n', []),
])
def test_the_name_check_finds_what_it_must(source: str, hits: list[str]) -> None:
    assert spelled(source) == hits
