"""``evaluate``: the conformance suite on a policy, one call from a training loop.

The suite runs as the command line runs it, in a child ``python -m pytest``: the
simulator never shares the trainer's process, its GPU context or its signal handlers,
and the run folder is an ordinary one. A policy given as a profile name or an endpoint
is reached as ``--libero-profile`` reaches it; a policy object, or a factory of them,
is served from a thread of the caller's process (``served.py``) and never pickled or
copied. While the child runs, each case's line in results.jsonl is progress.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_libero import children
from pytest_libero.api.evaluation import Evaluation
from pytest_libero.api.keywords import MAX_GPUS, Unspellable, option_args, pytest_arguments, spelled
from pytest_libero.api.progress import Progress, Told
from pytest_libero.api.served import AlreadyLent, OneObject, serving
from pytest_libero.config.workers import parse_gpus
from pytest_libero.files import json_text
from pytest_libero.policy.contract import Policy
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import echo
from pytest_libero.results.layout import SUMMARY_NAME, new_run_id

PROFILE_NAME = "evaluate"
"""The run folder's profile name when the policy is an object or a factory."""
INTERRUPTIBLE_PYTEST = ("import signal, sys, pytest; signal.signal(signal.SIGINT, "
                        "signal.default_int_handler); sys.exit(pytest.main(sys.argv[1:]))")
"""``python -m pytest`` that Ctrl-C always interrupts: a process started where SIGINT is
ignored (a background job) passes that on, and pytest would never see the signal that
makes it write the summary and stop."""
USAGE_ERROR = 4
"""pytest's exit code for a usage error (``pytest.ExitCode.USAGE_ERROR``): the plugin's
refusal of an option, before any case."""
POLL_S = 0.5
"""How often the run folder is looked at for progress."""
STOP_S = 60.0
"""How long an interrupted child may take to write its summary before it is killed."""
LEFTOVER_S = 15.0
"""How long the child's own processes (its workers' forkservers) may outlive it before
they are killed: ``evaluate`` returns once they are gone."""


class EvaluationRefused(ValueError):
    """The run refused what it was given before any case (the command line's exit 4),
    in the plugin's own words."""


class EvaluationFailed(RuntimeError):
    """The run ended without a summary: the child pytest failed (its output's end says why)."""


class EvaluationInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the run: ``run_dir`` holds what ran (None: it stopped before the run
    had a folder); ``evaluate(..., resume=run_dir)`` with the same policy and keywords
    runs the rest. A KeyboardInterrupt, so code that catches that goes on working."""

    def __init__(self, message: str, run_dir: Path | None) -> None:
        super().__init__(message)
        self.run_dir = run_dir


def evaluate(
    policy: Any,
    *,
    scope: str | None = None,
    suite: str | None = None,
    task_ids: Sequence[int] | str | None = None,
    mode: str | None = None,
    perturb: str | None = None,
    min_success: float | None = None,
    decide: str | None = None,
    order_seed: int | None = None,
    evidence: str | None = None,
    budget_mode: str | None = None,
    max_policy_calls: int | None = None,
    replan_interval: int | None = None,
    track: str | None = None,
    workers: int = 1,
    gpus: Sequence[int] | str | None = None,
    results: str | Path | None = None,
    run_id: str | None = None,
    resume: str | Path | None = None,
    pytest_args: Sequence[str] = (),
    progress: Progress | None = None,
) -> Evaluation:
    """Run the suite on ``policy`` and return the run's :class:`Evaluation`.

    ``policy``: a profile name or path (as ``--libero-profile``), an endpoint
    (``ws://HOST:PORT``), a policy object (``infer``, ``reset``, ``metadata``; one
    episode at a time, so ``workers`` must be 1), or a factory of them (called once per
    concurrent episode). Every other keyword is the plugin option of the same name
    (``keywords.KEYWORDS``; None: the option's default); ``workers`` is ``-n``, and
    ``gpus`` without ``workers`` runs one worker per GPU, as ``--libero-gpus`` does (the
    GPUs are the simulator workers'; a served policy stays on its own device); anything
    else goes in ``pytest_args``. ``progress(done, total, successes)`` is told as cases
    finish; without it a terminal gets a bar (tqdm's when installed). ``resume``: the run
    folder of an interrupted call, whose unattempted cases this call runs (with the same
    policy and keywords, and no ``run_id`` or ``results``: the folder is the run's).

    Raises :class:`EvaluationRefused` (in the plugin's words) for what the command line
    refuses (a ``run_id`` whose folder exists included: a call never returns another
    run's figures), TypeError for a policy of no usable kind, :class:`EvaluationFailed`
    when the run ends without a summary of its own. Ctrl-C stops the run (its summary is
    written, the rest unattempted, ``stopped`` saying so) and reaches the caller as
    :class:`EvaluationInterrupted`, a KeyboardInterrupt naming the run folder.
    """
    try:
        options = option_args({
            "scope": scope, "suite": suite, "task_ids": task_ids, "mode": mode, "perturb": perturb,
            "min_success": min_success, "decide": decide, "order_seed": order_seed,
            "evidence": evidence, "budget_mode": budget_mode, "max_policy_calls": max_policy_calls,
            "replan_interval": replan_interval, "track": track, "gpus": gpus})
        extra = pytest_arguments(pytest_args)
    except Unspellable as exc:
        raise EvaluationRefused(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="pytest-libero-evaluate-") as scratch:
        log = Path(scratch) / "pytest.log"
        with _reached(policy, _workers(workers, gpus), Path(scratch)) as (reaching, profile_name):
            run_dir, where = _run_folder(profile_name, results, run_id, resume)
            argv = [sys.executable, "-c", INTERRUPTIBLE_PYTEST, "-p", "no:cacheprovider", *reaching,
                    *options, *where, *(["-n", str(workers)] if workers > 1 else []), *extra]
            before = _stamp(run_dir / SUMMARY_NAME)
            try:
                code = _child(argv, log, run_dir, progress)
            except KeyboardInterrupt:
                raise _interrupted(run_dir, before) from None
        said = _said(log)
    if code == USAGE_ERROR:  # refused before any case: a summary there is another run's
        raise EvaluationRefused(said)
    found = _stamp(run_dir / SUMMARY_NAME)
    if found is None or found == before:
        raise EvaluationFailed(f"the run ended (pytest exit {code}) without a summary of its own "
                               f"at {run_dir}: {said}")
    return Evaluation.read(run_dir, code)


def _run_folder(profile_name: str, results: str | Path | None, run_id: str | None,
                resume: str | Path | None) -> tuple[Path, list[str]]:
    """The run's folder and the options that name it: a new one under ``results``, or the
    folder ``resume`` continues."""
    if resume is None:
        root = Path(results if results is not None else "libero-results").resolve()
        run = run_id or new_run_id()
        return root / profile_name / run, [f"--libero-results={root}", f"--libero-run-id={run}"]
    if run_id is not None or results is not None:
        raise EvaluationRefused("resume continues its own run folder: drop run_id and results")
    run_dir = Path(resume).resolve()
    return run_dir, [f"--libero-resume={run_dir}"]


def _interrupted(run_dir: Path, before: tuple[int, int, int] | None) -> EvaluationInterrupted:
    """The interrupt as the caller gets it: where the run is and how to finish it."""
    if _stamp(run_dir / SUMMARY_NAME) in (None, before):
        return EvaluationInterrupted("evaluate() was interrupted before its run wrote a summary; "
                                     f"nothing at {run_dir} to resume", None)
    left = Evaluation.read(run_dir, 2).summary.get("unattempted") or []
    return EvaluationInterrupted(f"evaluate() was interrupted with {len(left)} case(s) unattempted; the "
                                 f"run is at {run_dir}: finish it with evaluate(<the same policy and "
                                 f"keywords>, resume={str(run_dir)!r})", run_dir)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a file written by this call from one that was there before (None: no
    file): its inode, size and modification time."""
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns) if stat.S_ISREG(found.st_mode) else None


def _workers(workers: int, gpus: Sequence[int] | str | None) -> int:
    """How many episodes run at once: ``workers``, or with ``gpus`` and no ``workers``
    one per GPU (``--libero-gpus`` without ``-n``)."""
    if type(workers) is not int or not 1 <= workers <= MAX_GPUS:
        raise EvaluationRefused(f"workers={echo(workers)}: give a whole number from 1 to {MAX_GPUS} "
                                "(pytest -n)")
    if workers > 1 or gpus is None:
        return workers
    try:
        return len(parse_gpus(spelled(gpus, "gpus")))
    except (SetupError, Unspellable) as exc:
        raise EvaluationRefused(str(exc)) from None


@contextmanager
def _reached(policy: Any, workers: int, work: Path) -> Iterator[tuple[list[str], str]]:
    """The options that reach ``policy`` (``--libero-profile``, and ``--libero-endpoint``
    for an endpoint or what is served here), and the run folder's profile name; an object
    or a factory is served for as long as the block runs. The profile file names no
    endpoint, so a call that resumes a run has the same profile (its port is another)."""
    if isinstance(policy, (str, os.PathLike)):
        text = os.fspath(policy)
        if "://" in text:
            yield _reaching(work, text, "an endpoint given to pytest_libero.evaluate"), PROFILE_NAME
            return
        from pytest_libero.config.profiles import load_profile

        try:
            name = load_profile(text).name
        except SetupError as exc:
            raise EvaluationRefused(str(exc)) from None
        yield [f"--libero-profile={text}"], name
        return
    if hasattr(policy, "infer"):
        if workers > 1:
            raise EvaluationRefused(f"a policy object ({_named(type(policy))}) serves one episode "
                                    f"at a time, and {workers} workers would run {workers} at once: "
                                    "pass a factory that builds one object per episode")
        lent = OneObject(_usable(policy, "the policy object"))
        try:
            with lent.lent_out(), serving(lent, close_policies=False) as endpoint:
                yield _reaching(work, endpoint, "served in-process by pytest_libero.evaluate: "
                                + _named(type(policy)), counters=True), PROFILE_NAME
        except AlreadyLent as exc:
            raise EvaluationRefused(str(exc)) from None
        return
    if not callable(policy):
        raise TypeError(f"evaluate() needs a profile name, an endpoint (ws://HOST:PORT), a policy "
                        f"object with infer() or a factory of them; got a {type(policy).__name__}")
    with serving(_checked(policy), close_policies=True) as endpoint:
        yield _reaching(work, endpoint, "served in-process by pytest_libero.evaluate: "
                        + _named(policy), counters=True), PROFILE_NAME


def _usable(policy: Any, what: str) -> Any:
    missing = [name for name in ("infer", "reset", "metadata") if not hasattr(policy, name)]
    if missing or not callable(policy.infer):
        raise TypeError(f"{what} ({_named(type(policy))}) has no {', '.join(missing or ['callable infer'])}: "
                        "a policy has infer(observation), reset() and metadata (docs/serving.md)")
    return policy


def _checked(factory: Callable[[], Any]) -> Callable[[], Policy]:
    def build() -> Policy:
        built: Policy = _usable(factory(), f"what the factory {_named(factory)} built")
        return built
    return build


def _named(thing: Any) -> str:
    return f"{getattr(thing, '__module__', '?')}.{getattr(thing, '__qualname__', type(thing).__name__)}"


def _reaching(work: Path, endpoint: str, description: str, *, counters: bool = False) -> list[str]:
    """A websocket profile in the call's scratch folder, and ``endpoint`` as the option
    that points it there. ``counters``: each request carries the episode's counters, so a
    policy of this process sees the observation an in-process one would
    (``Observation.policy_calls``, ``executed_controls``)."""
    path = work / f"{PROFILE_NAME}.toml"
    # A JSON string is a TOML basic string: the values are quoted by the strict writer.
    text = (f"name = {json_text(PROFILE_NAME)}\ndescription = {json_text(description)}\n"
            "track = \"rgb\"\n\n[policy]\ntransport = \"websocket\"\n")
    path.write_text(text + ("\n[request]\ncounters = true\n" if counters else ""), encoding="utf-8")
    return [f"--libero-profile={path}", f"--libero-endpoint={endpoint}"]


def _child(argv: list[str], log: Path, run_dir: Path, progress: Progress | None) -> int:
    """Run the child pytest to its end, telling progress; Ctrl-C interrupts it (its
    summary is written, :data:`STOP_S` at most) and is raised again once it has ended.
    Its own processes are waited for (:data:`LEFTOVER_S`, then killed) before this returns."""
    told = Told(run_dir, progress)
    try:
        # The child is a run of its own: not the calling pytest's options, plugins or worker.
        ended = children.run(argv, output=log, env=children.clean_environment(), tick=told.update,
                             tick_s=POLL_S, stop_s=STOP_S, leftover_s=LEFTOVER_S)
    finally:
        told.update()
        told.close()
    assert isinstance(ended, children.Ran)  # no timeout was given
    return ended.code


def _said(log: Path) -> str:
    """What the child said last: its usage error lines, else the end of its output."""
    try:
        lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
                 if line.strip()]
    except OSError:
        return "(no output)"
    errors = [line.removeprefix("ERROR: ") for line in lines if line.startswith("ERROR: ")]
    return "; ".join(errors) if errors else "\n".join(lines[-15:])
