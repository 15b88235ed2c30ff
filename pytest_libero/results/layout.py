"""The run folder's names, and how the files a command relies on are read.

``<results root>/<profile>/<run id>/`` (a shard of a sharded run one level deeper, in
``shard-<I>-of-<N>/``) holds:

- ``run.json``: what the run was; written as the folder is made, appended to by a resume.
- ``results.jsonl``: one case record a line, appended and fsynced as each case ends.
- ``summary.json``: counts, rates and gates; written as the session ends (and by merge).
- ``cases/<case id>/``: one case's folder (``evidence/layout.py`` names what it holds);
  a resume renames an interrupted one ``<case id>.interrupted-<n>``.
- ``results.jsonl.torn-<n>``: a killed writer's torn last line, set aside by a resume.
- ``server.log``, ``robustness.svg``, ``verify.json``: a launched policy server's output,
  the robustness picture, ``pytest-libero verify``'s verdicts.
- ``decision.json``: a run decided early (``--libero-decide``): its decision, written
  when it is made; every process looks for it before it starts a case.

The JSON files are written whole and atomically (``files.write_json_atomic``), the
records line by line (``folder.RunFolder``). Every module names these files through
here, and run.json, results.jsonl and summary.json are read here, so one that is
missing, unreadable, cut short, not JSON or of the wrong type gets one answer, naming
the file and the fix, from merge, verify, safety, resume, the baseline gate and the
report alike. What run.json must hold is ``run_reader``'s to check; this module reads it.

Each is read only if it is a regular file (a FIFO would block the reader) and only up
to the size a valid one can have: a run file up to :data:`JSON_LIMIT`, a results.jsonl
line up to a record's limit. results.jsonl holds one line per case: a second line for a
case (another outcome, say) is damage every reader refuses, never a choice between two.

It lives in results/, the lowest layer whose code touches a run folder: the recorder,
merge and gates beside it, the report, audit, the session and the entry points above.
safety/ (below) reads a case folder's signals file only; the ``safety`` command reads
the run folder in cli.py. episode/ and evidence/ write the case folder they are handed.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

from pytest_libero.episode.record import CaseRecord, record_from_json
from pytest_libero.episode.record_check import RECORD_LIMIT
from pytest_libero.files import CorruptLine, Refused, open_regular, read_capped, read_jsonl
from pytest_libero.protocol.errors import SetupError

RUN_NAME = "run.json"
RESULTS_NAME = "results.jsonl"
SUMMARY_NAME = "summary.json"
CASES_NAME = "cases"
SERVER_LOG_NAME = "server.log"
FIGURE_NAME = "robustness.svg"
VERIFY_NAME = "verify.json"
DECISION_NAME = "decision.json"

JSON_LIMIT = 64 << 20
"""The most bytes run.json or summary.json may hold (a run of every case of every
suite and perturbation writes a few megabytes)."""

COPY_AGAIN = "use the run folder as the run wrote it (copy it again)"
DAMAGED = f"it was not written by pytest-libero, or it is damaged: {COPY_AGAIN}"
"""The fix for a run.json or results.jsonl that reads but is not what a run writes."""
BEYOND_TORN = f"{RESULTS_NAME} is damaged beyond a torn last line: {COPY_AGAIN}"
"""A line other than a killed writer's torn last one does not read."""

_MISSING = {
    RUN_NAME: "{where}: not a run folder (no run.json); name the folder a run wrote, "
              "<results>/<profile>/<run id>",
    RESULTS_NAME: "{where} has no results.jsonl: not a run folder, or an incomplete copy of "
                  "one (a run creates it before its first case); " + COPY_AGAIN,
    SUMMARY_NAME: "{where} has no summary.json: the run stopped before writing it; "
                  "pytest-libero merge {folder} writes it anew, in a new folder",
}
_FIX = {
    RUN_NAME: COPY_AGAIN,
    SUMMARY_NAME: "copy it again, or let pytest-libero merge {folder} write it anew, in a "
                  "new folder",
}


def new_run_id() -> str:
    """A sortable, unique run id: UTC time plus a random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


def resume_hint(run_dir: Path) -> str:
    """How to finish a run that stopped early: what ``stopped`` and the terminal tell."""
    return (f"finish the run with the same command plus --libero-resume={run_dir} (and without "
            "--libero-run-id or --libero-results)")


def run_folder_path(root: Path, profile: str, run_id: str, shard: tuple[int, int] | None) -> Path:
    """<root>/<profile>/<run id>, and one level more per shard of a sharded run."""
    path = root / profile / run_id
    return path / f"shard-{shard[0]}-of-{shard[1]}" if shard else path


def profile_folder(path: Path) -> Path:
    """The folder that holds a run folder (a shard's: the one that holds its run)."""
    return path.parent.parent if path.name.startswith("shard-") else path.parent


def run_id_of(path: Path) -> str:
    """The run id of a run folder, a shard folder included."""
    return path.parent.name if path.name.startswith("shard-") else path.name


def case_path(run_dir: Path, case: str) -> Path:
    """The folder of one case's evidence and record."""
    return run_dir / CASES_NAME / case


def interrupted_path(run_dir: Path, case: str, n: int) -> Path:
    """Where a resume keeps the ``n``-th interrupted attempt of a case, never deleted."""
    return run_dir / CASES_NAME / f"{case}.interrupted-{n}"


def torn_path(run_dir: Path, n: int) -> Path:
    """Where a resume keeps the ``n``-th torn last line of results.jsonl, byte for byte."""
    return run_dir / f"{RESULTS_NAME}.torn-{n}"


def named(folder: Path, option: str = "") -> str:
    """How a message names a run folder: ``--option=FOLDER`` when an option gave it."""
    return f"{option}={folder}" if option else str(folder)


def type_name(value: object) -> str:
    """A JSON value's type as a message says it (``null`` for None)."""
    return "null" if value is None else type(value).__name__


def missing(folder: Path, name: str, option: str = "") -> SetupError:
    """The answer when ``folder`` lacks run.json, results.jsonl or summary.json."""
    return SetupError(_MISSING[name].format(where=named(folder, option), folder=folder))


def _unreadable(where: str, path: Path, exc: OSError) -> SetupError:
    return SetupError(f"{where}: cannot read {path.name} ({exc.strerror or exc}); give this "
                      f"user read access to {path}")


def read_json(folder: Path, name: str, option: str = "") -> Any:
    """run.json or summary.json of ``folder``, parsed: refused, naming the file and the
    fix, when it is missing, unreadable, or not UTF-8 JSON (cut short, say)."""
    where = named(folder, option)
    path = folder / name
    try:
        return json.loads(read_capped(path, JSON_LIMIT).decode("utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        raise missing(folder, name, option) from None
    except Refused as exc:
        raise SetupError(f"{where}: {exc}; {_FIX[name].format(folder=folder)}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SetupError(f"{where}: {name} is damaged, not JSON ({exc}); "
                         f"{_FIX[name].format(folder=folder)}") from None
    except OSError as exc:
        raise _unreadable(where, path, exc) from None


def read_summary(folder: Path, option: str = "") -> dict[str, Any]:
    """summary.json of ``folder``: a table, with its ``robustness`` block a table or absent."""
    summary = read_json(folder, SUMMARY_NAME, option)
    problem = _summary_problem(summary)
    if problem is not None:
        raise SetupError(f"{named(folder, option)}: {problem}; "
                         f"{_FIX[SUMMARY_NAME].format(folder=folder)}")
    checked: dict[str, Any] = summary
    return checked


def _summary_problem(summary: Any) -> str | None:
    """What of summary.json a reader relies on has the wrong type, or None."""
    if not isinstance(summary, dict):
        return f"{SUMMARY_NAME} is a {type_name(summary)}, not a table"
    robustness = summary.get("robustness")
    if robustness is not None and not isinstance(robustness, dict):
        return f"{SUMMARY_NAME}'s robustness is a {type_name(robustness)}, not a table"
    return None


def outcomes_after(folder: Path, offset: int) -> tuple[list[str], int]:
    """The outcomes of the results.jsonl lines written whole since byte ``offset``, and
    the offset after them: what a reader following a live run needs each time it looks,
    without reading the file again from its start (OSError: no file yet; CorruptLine: a
    line that is not a record's)."""
    path = folder / RESULTS_NAME
    with open_regular(path) as stream:
        stream.seek(offset)
        data = stream.read(16 * RECORD_LIMIT)  # bounded; the next look reads on
    whole = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next look
    outcomes = []
    for line in whole.splitlines():
        try:
            outcomes.append(str(json.loads(line)["outcome"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptLine(f"{path}: a line after byte {offset} is not a case record ({exc})") from None
    return outcomes, offset + len(whole)


def read_results(folder: Path, option: str = "") -> list[CaseRecord]:
    """results.jsonl of ``folder`` (a torn last line, left by a killed writer, is ignored);
    a line that is not a case record, or a second line for a case, is refused naming the
    file, the line and the field."""
    results = folder / RESULTS_NAME
    try:
        records: list[CaseRecord] = []
        lines: dict[str, int] = {}
        for number, line in enumerate(read_jsonl(results, RECORD_LIMIT), start=1):
            try:
                record = record_from_json(line)
            except ValueError as exc:
                raise SetupError(f"{results}:{number}: {exc}; {BEYOND_TORN}") from None
            first = lines.setdefault(record["case"], number)
            if first != number:
                raise SetupError(f"{results}:{number}: a second line for {record['case'][:200]!r} "
                                 f"(the first is line {first}); one case has one line: "
                                 f"{BEYOND_TORN}")
            records.append(record)
        return records
    except (FileNotFoundError, NotADirectoryError):
        raise missing(folder, RESULTS_NAME, option) from None
    except Refused as exc:
        raise SetupError(f"{named(folder, option)}: {exc}; {COPY_AGAIN}") from None
    except CorruptLine as exc:
        raise SetupError(f"{exc}; {BEYOND_TORN}") from None
    except UnicodeDecodeError as exc:
        raise SetupError(f"{results}: not UTF-8 text ({exc.reason}); {BEYOND_TORN}") from None
    except OSError as exc:
        raise _unreadable(named(folder, option), results, exc) from None
