"""What holds across the checkout, not only the package: short functions, and no pointer
to a design document the repository does not have."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
CODE_FOLDERS = ("pytest_libero", "bench", "harness", "release")
"""The package, the benchmarks, the helpers they share with the tests, the release tools."""
NOT_THE_CHECKOUT = {".git", ".venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                    ".hypothesis", "libero-results", "build", "dist", ".gl", ".whl"}
"""Folders of a working copy that are not the project's files (.gitignore names most)."""
GONE = "DESIGN" + ".md"
CITED = (GONE.encode(), b"DESIGN" + b" section")
"""A design document the project once pointed to; its rules live in docs/ (protocol.md
holds P1-P12, architecture.md the packages' order). Spelled apart so that this file
does not mention it."""


def functions(path: Path, root: Path = ROOT) -> Iterator[tuple[str, int]]:
    """Every function and method in ``path`` (nested ones too), named by its place under
    ``root``, with its length in lines from its ``def`` line to its last line."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            yield f"{path.relative_to(root)}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1


def checkout_files(root: Path = ROOT) -> Iterator[Path]:
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders
                               if d not in NOT_THE_CHECKOUT and not d.endswith(".egg-info"))
        yield from (Path(folder) / name for name in sorted(files))


def test_no_function_is_longer_than_80_lines() -> None:
    """A longer one is split into named parts (the package, bench/, harness/, release/)."""
    paths = sorted(p for folder in CODE_FOLDERS for p in (ROOT / folder).rglob("*.py"))
    assert paths
    too_long = {name: lines for path in paths for name, lines in functions(path)
                if lines > MAX_FUNCTION_LINES}
    assert too_long == {}


def test_the_length_check_counts_from_def_to_the_last_line(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    (tmp_path / "short.py").write_text(f"def fits():\n{body}")
    (tmp_path / "long.py").write_text(f"@decorated\ndef spills():\n{body}    return x0\n")
    lengths = {name.split()[-1]: lines for path in tmp_path.glob("*.py")
               for name, lines in functions(path, tmp_path)}
    assert lengths == {"fits": 80, "spills": 81}


def test_nothing_points_to_a_design_document_that_is_not_there() -> None:
    """Code, tests and docs cite docs/ (e.g. docs/protocol.md for the rules P1-P12)."""
    assert not (ROOT / GONE).exists()
    citing = [str(p.relative_to(ROOT)) for p in checkout_files() if any(c in read(p) for c in CITED)]
    assert citing == []


def read(path: Path) -> bytes:
    """The file's bytes; none when it went away meanwhile (a test running beside this one)."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return b""


@pytest.mark.parametrize("pointer", ["docs/protocol.md", "docs/architecture.md"])
def test_the_documents_cited_in_its_place_exist(pointer: str) -> None:
    assert (ROOT / pointer).is_file()
