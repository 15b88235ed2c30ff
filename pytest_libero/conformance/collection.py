"""Collecting the shipped suite where it is installed, without touching ``sys.path``.

pytest's default import mode puts the folder above a test module's outermost package at
the front of ``sys.path`` (for the ``__init__.py`` of each package too). For the shipped
suite installed in site-packages that folder is site-packages itself, which is then on
``sys.path`` twice; LIBERO's asset package is a namespace package, whose portions are
looked up once per ``sys.path`` entry, so it reports two locations and LIBERO refuses to
load (every case errored in a plain, non-editable install). Here the suite's folders are
plain directories and its module is imported by its name, as any installed module is:
``sys.path`` stays what the user's interpreter made it, and the user's ``python_files``,
``python_functions`` and ``--import-mode`` do not change what the suite collects.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

SUITE_MODULE = "pytest_libero.conformance.test_libero"
SUITE_FUNCTION = "test_libero_task"


def suite_folder() -> Path:
    """The installed folder of the shipped test module (found without importing it)."""
    return Path(__file__).parent


class ShippedSuite(pytest.Module):
    """The suite's module; its one test is found whatever the user's
    ``python_functions`` say."""

    def istestfunction(self, obj: object, name: str) -> bool:
        return name == SUITE_FUNCTION and callable(obj)

    def istestclass(self, obj: object, name: str) -> bool:
        return False


class SuiteFolder(pytest.Directory):
    """The suite's folder: it holds the shipped module alone, imported by its dotted
    name, whatever the user's ``python_files`` say."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        path = self.path / (SUITE_MODULE.rpartition(".")[2] + ".py")
        module = ShippedSuite.from_parent(self, path=path)
        module.obj = importlib.import_module(SUITE_MODULE)
        return [module]


def suite_directory(path: Path, parent: pytest.Collector) -> pytest.Directory | None:
    """Plain directories for the suite's package folders (a ``Package`` would import
    their ``__init__.py`` by path, prepending site-packages); None elsewhere."""
    folder = suite_folder()
    if path == folder:
        return SuiteFolder.from_parent(parent, path=path)
    if path == folder.parent:
        return pytest.Dir.from_parent(parent, path=path)
    return None
