"""robosuite's invalid-escape warning is filtered where the simulator is imported, and
nothing else is (issue 61).

The warning comes from compiling robosuite's ``__init__.py``; an install with bytecode never
shows it, so each run here compiles from source into an empty pycache prefix, as a
bytecode-less uv install or a ``-B`` case host does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ESCAPE = "invalid escape sequence"
IMPORT = textwrap.dedent('''
    import sys
    if sys.argv[1] == "prepared":
        from pytest_libero.protocol.rendering import prepare_simulator_environment
        prepare_simulator_environment()
    import robosuite
    compile("x = '\\\\ '", sys.argv[2], "exec")  # the same warning from another package's file
''')


def imported(how: str, tmp_path: Path) -> str:
    other = str(tmp_path / "elsewhere" / "__init__.py")
    no_bytecode = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    done = subprocess.run([sys.executable, "-W", "default", "-c", IMPORT, how, other], capture_output=True,
                          text=True, timeout=120, env=no_bytecode)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_the_simulator_s_import_is_quiet_and_no_other_warning_is(tmp_path: Path) -> None:
    bare = imported("bare", tmp_path)
    assert "robosuite" in bare and bare.count(ESCAPE) == 2, bare  # the warning exists: the test can fail
    escapes = [line for line in imported("prepared", tmp_path).splitlines() if ESCAPE in line]
    assert len(escapes) == 1 and "elsewhere" in escapes[0], escapes


def test_a_pytest_run_filters_it_inside_a_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_compiles='''
        def test_compiles(tmp_path):
            for package in ("robosuite", "elsewhere"):
                compile("x = '\\\\ '", str(tmp_path / package / "__init__.py"), "exec")
    ''')
    done = pytester.runpytest_subprocess()
    done.assert_outcomes(passed=1)
    said = done.stdout.str()
    assert ESCAPE in said and "elsewhere" in said and "robosuite" not in said, said
