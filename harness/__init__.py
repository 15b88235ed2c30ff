"""Helpers the project's own tests, benchmarks and release tools share.

Not part of the installed package (the wheel ships ``pytest_libero`` only), and
``pytest_libero`` never imports it (tests/test_layout.py checks). Each module has one job:
``servers`` starts and stops a policy server, ``runs`` runs pytest and reads the run
folder it wrote, ``proctree`` walks /proc, ``native`` drives a bare LIBERO env as the
adapter would, ``printing`` writes the lines and tables measurements print, ``damage``
breaks a copy of the package's data files, ``hostile`` makes reliability.md's round-3 table
from the tests' rows.
"""
