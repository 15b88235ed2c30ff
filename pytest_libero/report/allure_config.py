"""The Allure 3 configuration for LIBERO results, and finding Allure 3 to apply it.

Allure 3 ignores the results folder's categories.json, and without a ``groupBy`` its
report files every case under its pytest module (``test_libero.py``). Both come from
Allure 3's own config file instead, so ``pytest-libero report`` writes one: the tree
groups by the three suite labels each case carries and the categories are
:data:`pytest_libero.report.allure.CATEGORIES`. The labels make the tree
LIBERO -> suite -> task in fast mode and suite -> task -> "state N" in full mode
(:func:`pytest_libero.report.allure.case_tree`), so one config serves both, and a
results folder holding both modes keeps them apart. Nothing is downloaded: Allure 3 is
used only where it is already installed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_libero.files import json_text
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped, echo
from pytest_libero.report.allure import CATEGORIES

CONFIG_NAME = "allurerc.mjs"
# The first line marks a config as ours, so rewriting it never clobbers a user's own.
HEADER = "// Written by `pytest-libero report`; it rewrites this file on each run.\n"
# The labels allure.case_tree sets on every case, outermost first. Fast mode: LIBERO,
# the suite, the task's name. Full mode: the suite, the task ("<task id> <name>"), and
# "state N" (its init state).
TREE_LABELS = ("parentSuite", "suite", "subSuite")
ALLURE_ENV = "PYTEST_LIBERO_ALLURE"
ALLURE_VERSION = "3.18.0"  # the release this project's tests render with


def allure3_config() -> dict[str, Any]:
    """Allure 3's config: the awesome report grouped by suite labels, our categories."""
    rules = [
        {"name": category["name"], "matchers": {"statuses": list(category["matchedStatuses"])}}
        for category in CATEGORIES
    ]
    return {
        "plugins": {"awesome": {"options": {"groupBy": list(TREE_LABELS)}}},
        "categories": {"rules": rules},
    }


def tree_path(result: Mapping[str, Any]) -> tuple[str, ...]:
    """Where Allure 3's tree files one ``*-result.json``: its TREE_LABELS values, in order."""
    labels = {label["name"]: label["value"] for label in result.get("labels", [])}
    return tuple(labels[name] for name in TREE_LABELS if name in labels)


def write_config(path: Path) -> Path:
    """Write the config as an ES module (Allure 3 imports allurerc.mjs as its default).

    An existing file is replaced only if this command wrote it: a user's own Allure
    config at the same path is refused, not lost.
    """
    if path.is_dir():
        raise SetupError(f"{path} is a folder; --config needs a file path such as {CONFIG_NAME}")
    if path.exists() and not path.read_bytes().startswith(HEADER.encode()):
        raise SetupError(
            f"{path} exists and was not written by pytest-libero; it is left as it is: "
            "pass --config with another path"
        )
    body = json_text(allure3_config(), indent=2, sort_keys=False)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{HEADER}export default {body};\n", encoding="utf-8")
    except OSError as exc:
        raise SetupError(f"--config {path}: cannot write it ({exc.strerror or exc}); give a "
                         "file path in a folder this user can write") from None
    return path


def check_results(folder: Path) -> None:
    """Refuse a folder that holds no Allure results, naming it and how to make them."""
    fix = f"run pytest with --alluredir={folder} first"
    if not folder.is_dir():
        raise SetupError(f"{folder} is not a folder: no Allure results there ({fix})")
    if not any(folder.glob("*-result.json")):
        raise SetupError(
            f"{folder} is not an Allure results folder (it has no *-result.json file); {fix}"
        )


def find_allure(environ: Mapping[str, str], cwd: Path) -> list[str] | None:
    """The command that runs Allure 3, or None when none is installed.

    ``$PYTEST_LIBERO_ALLURE`` (the ``allure`` executable or its ``cli.js``) is taken as
    given and must be Allure 3; otherwise a local ``npm install`` in the working folder,
    then an ``allure`` on PATH, each used only if it says it is 3.x (Allure 2 has the
    same command name but ignores this config).
    """
    search_path = environ.get("PATH", os.defpath)
    explicit = environ.get(ALLURE_ENV)
    if explicit:
        path = Path(explicit)
        try:  # a name longer than the system takes is an answer, not a traceback
            problem = ("is a folder" if path.is_dir() else "no such file" if not path.is_file()
                       else "is not executable" if path.suffix not in {".js", ".mjs", ".cjs"}
                       and not os.access(path, os.X_OK) else None)
        except OSError as exc:
            problem = exc.strerror or str(exc)
        if problem is not None:
            raise SetupError(f"{ALLURE_ENV}={echo(explicit)}: {problem}; point it at Allure 3's "
                             "allure executable or its cli.js, or unset it")
        command = _command(path, search_path)
        version = _version(command)
        if not version.startswith("3."):
            raise SetupError(
                f"{ALLURE_ENV}={echo(explicit)} is not Allure 3 (its --version said "
                f"{clipped(version, 80)!r}); "
                "point it at Allure 3's allure executable or its cli.js"
            )
        return command
    on_path = shutil.which("allure", path=search_path)
    for candidate in (cwd / "node_modules" / ".bin" / "allure", on_path):
        if candidate is None or not Path(candidate).is_file():
            continue
        command = _command(Path(candidate), search_path)
        if _version(command).startswith("3."):
            return command
    return None


def generate_command(allure: Sequence[str], config: Path, results: Path, report: Path) -> list[str]:
    """Allure 3's generate for these folders, with this config."""
    return [*allure, "generate", "--config", str(config), str(results), "-o", str(report)]


def not_found_message(config: Path, results: Path, report: Path) -> str:
    """What to run when Allure 3 is missing: the install, or the same report via npx."""
    npx = generate_command(["npx", "--yes", f"allure@{ALLURE_VERSION}"], config, results, report)
    return "\n".join([
        "Allure 3 was not found, so no report was generated.",
        f"Install it (it needs Node.js) in this folder: npm install allure@{ALLURE_VERSION}",
        f"and rerun this command, or set {ALLURE_ENV} to its allure executable.",
        f"Or generate the report now with npx: {shlex.join(npx)}",
    ])


def _command(path: Path, search_path: str) -> list[str]:
    """A JS entry runs under node; anything else is executed as it is."""
    if path.suffix not in {".js", ".mjs", ".cjs"}:
        return [str(path)]
    node = shutil.which("node", path=search_path)
    if node is None:
        raise SetupError(f"{path} is a Node.js script, but node is not on PATH; install Node.js")
    return [node, str(path)]


def _version(command: Sequence[str]) -> str:
    try:
        done = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return done.stdout.strip() or done.stderr.strip()


__all__ = [
    "ALLURE_ENV",
    "CONFIG_NAME",
    "HEADER",
    "TREE_LABELS",
    "allure3_config",
    "check_results",
    "find_allure",
    "generate_command",
    "not_found_message",
    "tree_path",
    "write_config",
]
