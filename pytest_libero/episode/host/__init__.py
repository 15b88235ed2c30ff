"""The case host: each case's simulator in a watched child process, the next case set
up ahead, full mode's kept environment.

A segfault, an abort, an OOM kill or a hang in MuJoCo must cost one case, never the
pytest worker: the case runs in a child process (which also returns every byte the
simulator allocated when it ends). The child reports each phase and every observation
and control over a pipe; the host kills it when a phase outlives its allowance and
records the case as errored with the signal or timeout, the last counters seen and the
tail of the child's captured output.

- ``host.py``: :class:`SimulatorHost`, which process runs each case, set-up ahead;
- ``process.py``: one case process as the host sees it, its states;
- ``messages.py``: what host and process say to each other, one type per message;
- ``watchdog.py``: each phase's allowance, and what a lost process is called;
- ``launch.py``: forking a case process from the worker's forkserver;
- ``child.py``: the case process's side.

Which process runs each case, and what it keeps or sets up next, is one rule:
``catalog/placement.py``'s :func:`~pytest_libero.catalog.placement.decide`.
"""

from pytest_libero.episode.host.host import SimulatorHost, run_isolated

__all__ = ["SimulatorHost", "run_isolated"]
