"""The ``pytest-libero`` command: work on result folders outside a pytest session.

``merge`` joins shards (or the pieces of a resumed or killed run) and can gate the
whole: a sharded run is judged once, on all its cases. ``report`` turns an Allure
results folder into the HTML report, grouped LIBERO -> suite -> task. ``verify``
re-executes a run folder's recorded actions and checks every case against its record.
``export`` writes a run's evidence as a LeRobot dataset; ``log`` sends a run's results
to an experiment tracker (docs/export.md), or its episodes as CSV. ``plan`` predicts a
run's cost before it starts (docs/scale.md). ``compare``, ``table`` and ``card`` give the
numbers people publish: runs compared case by case with exact tests, one run's table, a
model card's block (docs/compare.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

from pytest_libero import unsupported_python
from pytest_libero.episode.record import CaseRecord
from pytest_libero.files import Refused
from pytest_libero.protocol.digits import decimal, decimal_arg, whole_arg
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped, echo
from pytest_libero.report import allure_config
from pytest_libero.report.figures import write_figure
from pytest_libero.report.terminal import summary_lines
from pytest_libero.results.gate import evaluate_gates, load_baseline
from pytest_libero.results.layout import RESULTS_NAME, VERIFY_NAME, read_results, read_summary
from pytest_libero.results.merge import merge_runs
from pytest_libero.results.renderers import joined, renderer_uses
from pytest_libero.results.run_reader import RunRead, read_run, shown
from pytest_libero.safety.verdict import Thresholds

PUBLISHING = {"compare": "compare runs case by case: rates, exact intervals, McNemar, Holm "
              "(exit 1: a later run is significantly worse than the first)",
              "table": "one run's success rates per suite with their intervals",
              "card": "a Hugging Face model card's model-index block and results section"}
"""Commands of ``publish/`` (docs/compare.md), each with its own parser."""


def main(argv: Sequence[str] | None = None) -> int:
    python_problem = unsupported_python()
    if python_problem is not None:
        print(f"pytest-libero: error: {python_problem}", file=sys.stderr)
        return 4
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["plan"]:  # the run's own options follow: pytest's parser reads them
        from pytest_libero.planning.command import plan_main

        return plan_main(given[1:])
    if given[:1] == ["check-server"]:  # a pytest session of its own (docs/check_server.md)
        from pytest_libero.certify.command import main as check_server_main

        return check_server_main(given[1:])
    if given[:1] and given[0] in PUBLISHING:  # their usage errors exit 4 (docs/compare.md)
        from pytest_libero.publish.command import main as publish_main

        return publish_main(given)
    return _main(given)


def _listed(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The commands that parse their own options, listed in the help only."""
    commands.add_parser(
        "plan", add_help=False,
        help="predict a run's wall time and the best worker count before it starts "
        "(pytest-libero plan --help; the run's own options follow)")
    for name, what in PUBLISHING.items():
        commands.add_parser(name, add_help=False, help=f"{what} (pytest-libero {name} --help)")
    commands.add_parser(
        "check-server", add_help=False,
        help="check a policy server against the contract with golden observations, no "
        "simulator; write a certificate (pytest-libero check-server --help)")


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="pytest-libero", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    _listed(commands)
    merge = commands.add_parser(
        "merge",
        help="merge result folders of shards, resumed or killed runs into a new one",
        description="Merge run folders that share protocol identity, profile and "
        "selection; cases missing from all of them are unattempted.",
    )
    merge.add_argument("folders", nargs="+", type=Path, metavar="RUN_DIR")
    merge.add_argument("--out", help="the new folder (must not exist, nor lie inside a "
                       "folder being merged); default: a new run id beside the first folder")
    merge.add_argument("--min-success", type=decimal_arg, metavar="RATE",
                       help="gate the merged run: exit 1 unless complete and at least RATE")
    merge.add_argument("--min-safe-success", type=decimal_arg, metavar="RATE",
                       help="gate the merged run: exit 1 unless complete, monitored, and "
                       "its safe-success rate is at least RATE")
    merge.add_argument("--baseline", type=Path, metavar="RUN_DIR",
                       help="gate the merged run against an earlier run (exact McNemar)")
    merge.add_argument("--baseline-alpha", type=decimal_arg, default=0.05)
    report = commands.add_parser(
        "report",
        help="generate the Allure 3 HTML report from an --alluredir folder",
        description="Write Allure 3's config (tree LIBERO -> suite -> task, categories for "
        "infrastructure errors and native failures), then run Allure 3's generate with it. "
        f"Allure 3 is ${allure_config.ALLURE_ENV}, ./node_modules/.bin/allure or an allure "
        "3.x on PATH; without one the config is still written, the command to run is "
        "printed, and the exit code is 1.",
    )
    report.add_argument("results", type=Path, metavar="ALLURE_RESULTS_DIR")
    report.add_argument("-o", "--output", type=Path, default=Path("allure-report"),
                        metavar="REPORT_DIR", help="where the report goes (default: allure-report)")
    report.add_argument("--config", type=Path, default=Path(allure_config.CONFIG_NAME),
                        help=f"the Allure 3 config to write (default: {allure_config.CONFIG_NAME})")
    verify = commands.add_parser(
        "verify",
        help="prove a run folder by re-executing every case's recorded actions",
        description="Check each case's evidence files against their recorded hashes, then "
        "re-open its episode in a fresh simulator process, re-run the recorded actions and "
        "compare every delivered observation hash, the native outcome and the counters with "
        f"the record. Writes {VERIFY_NAME} in RUN_DIR; exit 0 only when every case verifies.",
    )
    verify.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    verify.add_argument("--case", action="append", default=[], metavar="ID",
                        help="verify only this case (repeatable)")
    verify.add_argument("-n", "--jobs", type=whole_arg, default=1, metavar="N",
                        help="cases re-executed side by side (default 1)")
    verify.add_argument("--libero-kind", action="append", default=[], metavar="MODULE:CLASS",
                        help="a perturbation kind of your own that the run used (repeatable): "
                        "verify imports only the code you name, never what the run folder names")
    verify.add_argument("--libero-adapter", metavar="MODULE:FACTORY",
                        help="the benchmark adapter of your own that the run used, likewise")
    safety = commands.add_parser(
        "safety",
        help="recompute the safety verdicts of a run folder from its raw signals",
        description="Read each case's safety.npz and evaluate it again, under the recorded "
        "thresholds or changed ones (--threshold NAME=VALUE); print each case's verdict "
        "and whether it equals the recorded one. Nothing is written. See docs/safety.md.",
    )
    safety.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    safety.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE",
                        help="e.g. tilt_deg=30 or displacement_m=0.02 (repeatable)")
    _add_export_commands(commands)
    args = parser.parse_args(argv)
    if args.command == "export":
        return _export(parser, args)
    if args.command == "log":
        return _log(parser, args)
    if args.command == "safety":
        return _safety(parser, args)
    if args.command == "report":
        return _report(parser, args)
    if args.command == "verify":
        return _verify(parser, args)
    return _merge(parser, args)


def _add_export_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser(
        "export",
        help="write a run folder's evidence as a LeRobot dataset (format v3), or its "
        "episodes as CSV",
        description="One episode per completed case, each frame stamped at its simulated "
        "time (control / 20 s): a run at --libero-evidence=dataset gives one frame per "
        "control at 20 fps with the action executed there; any other run one frame per "
        "decision at 20 / K fps with the K actions executed from it (refused when its "
        "decisions are not K controls apart). The images are decoded from the lossless "
        "streams and checked against their sha256; the proprio vector on the rgb+proprio "
        "track, next.success, next.done and the instruction sent. Errored cases are skipped "
        "and listed. Needs pytest-libero[lerobot]; docs/export.md. With --csv instead: one "
        "row per episode, the format in docs/records.md.",
    )
    export.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    target = export.add_mutually_exclusive_group(required=True)
    target.add_argument("--lerobot", metavar="OUT",
                        help="the dataset's root, a folder that does not exist yet")
    target.add_argument("--csv", metavar="OUT.csv",
                        help="one row per episode (case, task, init state, variant, outcome, "
                        "score, counters, seed, hashes) in a new file")
    export.add_argument("--videos", action="store_true",
                        help="encode the images with lerobot's video encoding instead of "
                        "PNG (lossy: the PSNR against the delivered images is printed)")
    export.add_argument("--repo-id", metavar="ID",
                        help="the dataset's repo id (default: pytest-libero/<run id>); "
                        "nothing is pushed")

    log = commands.add_parser(
        "log",
        help="log a finished, resumed or merged run folder to W&B or MLflow",
        description="Log what --libero-wandb and --libero-mlflow log at a session's end: the "
        "config, success rates with their Wilson intervals, robustness drops, latency "
        "percentiles, one table row per case and the failed cases' videos (docs/export.md). "
        "Exit 0 when every tracker named took the run, 1 when one did not (the line says "
        "why), 2 for a run folder that cannot be read.",
    )
    log.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    log.add_argument("--wandb", metavar="PROJECT", help="the W&B project (pytest-libero[wandb])")
    log.add_argument("--mlflow", metavar="TRACKING_URI",
                     help="the MLflow tracking URI (pytest-libero[mlflow])")


def _log(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pytest_libero.config.options import mlflow_uri_problem, wandb_project_problem
    from pytest_libero.config.settings import Trackers
    from pytest_libero.export.trackers import asked, log_run

    targets = asked(Trackers(args.wandb, args.mlflow))
    if not targets:
        parser.exit(2, "pytest-libero log: name a tracker: --wandb PROJECT or --mlflow TRACKING_URI\n")
    # The rules --libero-wandb and --libero-mlflow apply, before any tracker is imported.
    wandb_why = None if args.wandb is None else wandb_project_problem(args.wandb)
    if wandb_why is not None:
        parser.exit(2, f"pytest-libero log: --wandb={echo(args.wandb)} {wandb_why}; give a W&B "
                    "project name\n")
    mlflow_why = None if args.mlflow is None else mlflow_uri_problem(args.mlflow)
    if mlflow_why is not None:
        parser.exit(2, f"pytest-libero log: --mlflow={echo(args.mlflow)}: {mlflow_why}\n")
    try:
        logged = log_run(args.run_dir, targets)
    except SetupError as exc:
        parser.exit(2, f"pytest-libero log: {exc}\n")
    for result in logged:
        print(result.line, file=sys.stdout if result.ok else sys.stderr)
    return 0 if all(result.ok for result in logged) else 1


def _export(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.csv is not None:
        return _export_csv(parser, args)
    from pytest_libero.export.dataset import MissingLerobot, write_dataset
    from pytest_libero.export.episodes import plan_export

    if not args.lerobot:  # Path("") would be the current folder
        parser.exit(2, "pytest-libero export: --lerobot is empty; name a new folder for the dataset\n")
    args.lerobot = Path(args.lerobot)
    try:
        plan = plan_export(args.run_dir, args.lerobot)
        written = write_dataset(plan, args.lerobot, repo_id=args.repo_id or f"pytest-libero/{plan.run_id}",
                                videos=args.videos, say=lambda line: print(line, flush=True))
    except MissingLerobot as exc:
        parser.exit(2, f"{exc}\n")
    except SetupError as exc:
        parser.exit(2, f"pytest-libero export: {exc}\n")
    print(f"layout {plan.layout.name} at {plan.layout.fps} fps: {plan.layout.why}")
    for skipped in plan.skipped:
        print(f"skipped {skipped.case}: {skipped.why}")
    for camera, psnr in written.psnr_db.items():
        print(f"PSNR of the {camera} video against the delivered images: "
              + ", ".join(f"{k} {'exact' if v is None else f'{v:.2f} dB'}" for k, v in psnr.items()))
    print(f"exported {written.episodes} episodes ({written.frames} frames) of {args.run_dir} "
          f"as LeRobotDataset {written.repo_id!r} at {written.out}"
          + (f"; skipped {len(plan.skipped)} cases" if plan.skipped else ""))
    return 0


def _export_csv(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pytest_libero.publish.command import export_csv

    if not args.csv:
        parser.exit(2, "pytest-libero export: --csv is empty; name a new file for the episodes\n")
    try:
        rows = export_csv(args.run_dir, Path(args.csv))
    except SetupError as exc:
        parser.exit(2, f"pytest-libero export: {exc}\n")
    print(f"exported {rows} episodes of {args.run_dir} to {args.csv}")
    return 0


def _verify(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pytest_libero.audit.verify import verify_run

    if args.jobs < 1:
        parser.exit(2, f"pytest-libero verify: -n must be at least 1, got {args.jobs}\n")
    try:
        named = [k.strip() for given in args.libero_kind for k in given.split(",") if k.strip()]
        verdicts, written = verify_run(args.run_dir, args.case, jobs=args.jobs,
                                       say=lambda line: print(line, flush=True),
                                       code=(*named, *([args.libero_adapter] if args.libero_adapter else [])))
    except SetupError as exc:
        parser.exit(2, f"pytest-libero verify: {exc}\n")
    passed = sum(v.status == "verified" for v in verdicts)
    print(f"{passed} of {len(verdicts)} cases verified; verdicts: {written}")
    decided_as_recorded = json.loads(written.read_text(encoding="utf-8"))["passed"]  # --libero-decide
    return 0 if verdicts and passed == len(verdicts) and decided_as_recorded else 1


def _merge(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    for flag, rate in (("--min-success", args.min_success), ("--baseline-alpha", args.baseline_alpha),
                       ("--min-safe-success", args.min_safe_success)):
        if rate is not None and not 0.0 <= rate <= 1.0:
            parser.exit(2, f"pytest-libero merge: {flag} {rate:g} must be a number between 0 and 1\n")
    try:
        # The baseline is checked before anything is written: a refusal leaves no folder.
        read = [read_run(f) for f in args.folders] if args.baseline is not None else []
        first = read[0].run if read else {}
        extra = {k: first[k] for k in ("ood_identity", "perturb_identity") if first.get(k)}
        against = (joined(*(renderer_uses(r.records, where=str(r.path)) for r in read))
                   if args.baseline is not None else None)
        baseline = (load_baseline(args.baseline, first["protocol_identity"], "--baseline",
                                  extra=extra, against=against)
                    if args.baseline is not None else None)
        merged = merge_runs(args.folders, args.out)
        summary = read_summary(merged)
        verdicts = evaluate_gates(
            summary, {r["case"]: r for r in read_results(merged)}, min_success=args.min_success,
            baseline=baseline, alpha=args.baseline_alpha,
            min_safe_success=args.min_safe_success,
        )
    except SetupError as exc:
        parser.exit(2, f"pytest-libero merge: {exc}\n")
    for line in summary_lines(summary):
        print(line)
    for verdict in verdicts:
        print("\n".join(verdict.lines))
    figure = write_figure(merged)
    if figure is not None:
        print(f"robustness picture: {figure}")
    print(f"merged: {merged}")
    return 0 if all(v.passed for v in verdicts) else 1


def _safety(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pytest_libero.safety.recompute import thresholds_from

    try:
        overrides = {}
        for item in args.threshold:
            name, sep, value = item.partition("=")
            number = _number(value)
            if not sep or number is None or number <= 0:
                raise ValueError(f"--threshold {shown(item)!r}: write NAME=VALUE with a "
                                 "positive number, e.g. tilt_deg=30")
            overrides[name] = number
        thresholds = thresholds_from(overrides)
        read = read_run(args.run_dir)  # refused as merge and verify refuse it
        if not read.records:
            raise SetupError(f"{args.run_dir} has no finished case (its {RESULTS_NAME} holds "
                             "none: the run was stopped before its first case ended)")
        same = checked = 0
        for record in read.records:
            line, agrees = _safety_again(read, record, thresholds)
            print(line)
            checked += agrees is not None
            same += bool(agrees)
    except (ValueError, SetupError) as exc:
        parser.exit(2, f"pytest-libero safety: {exc}\n")
    print(f"{same} of {checked} cases give the recorded verdict under these thresholds")
    return 0


def _safety_again(read: RunRead, record: CaseRecord,
                  thresholds: Thresholds) -> tuple[str, bool | None]:
    """One case's verdict again from its signals file: the line to print, and whether it
    equals the recorded one (None: the record holds none). A case whose record holds a
    verdict and whose folder or signals cannot be read is an answer (SetupError naming
    it), never "no safety signals"."""
    from pytest_libero.safety.recompute import recompute
    from pytest_libero.safety.signals import SIGNALS_NAME

    case = shown(record["case"])
    folder = read.case_folder(record["case"])
    if folder.unreadable:
        raise SetupError(f"{case}: {folder.problem}")
    recorded = record.get("safety")
    if recorded is None:
        return f"{case}: no safety signals", None
    if not folder.readable:
        raise SetupError(f"{case}: its record holds a safety verdict, but {folder.problem}")
    signals = folder.path / SIGNALS_NAME
    listed = SIGNALS_NAME in ((record.get("evidence") or {}).get("files") or {})
    try:
        safety, engagement = recompute(folder.path, record["outcome"] == "success", thresholds)
    except FileNotFoundError:
        if listed:
            raise SetupError(f"{signals} is missing, though the case's record lists it; the "
                             "case folder is damaged: copy it again from where the run "
                             "wrote it") from None
        return f"{case}: no safety signals", None
    except Refused as exc:
        raise SetupError(f"{clipped(str(exc))}; the case folder is damaged: copy it again "
                         "from where the run wrote it") from None
    except PermissionError as exc:
        raise SetupError(f"cannot read {signals} ({exc.strerror}); give this user read "
                         "access to the case folder") from None
    except (OSError, ValueError, KeyError, TypeError, EOFError,
            zipfile.BadZipFile) as exc:  # a damaged file
        raise SetupError(f"{signals} is not a readable signals file ({type(exc).__name__}); "
                         "the case folder is damaged: copy it again from where the run "
                         "wrote it") from None
    agrees = (safety, engagement) == (recorded, record.get("engagement"))
    events = "; ".join(f"{e['predicate']} {e['object']} at control {e['control']}"
                       for e in safety["events"][:3])
    return (f"{case}: {safety['verdict']}, {engagement}"
            + (f" ({shown(events)})" if events else "")
            + ("" if agrees else f"  [recorded: {shown(recorded.get('verdict'))}, "
               f"{shown(record.get('engagement'))}]")), agrees


def _number(text: str) -> float | None:
    """A finite number in ASCII digits, or None."""
    value = decimal(text.strip())
    return value if value is not None and math.isfinite(value) else None


def _report(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    results: Path = args.results
    output: Path = args.output
    try:
        allure_config.check_results(results)
        allure = allure_config.find_allure(os.environ, Path.cwd())  # refusals write nothing
        config = allure_config.write_config(args.config)
    except SetupError as exc:
        parser.exit(2, f"pytest-libero report: {exc}\n")
    print(f"Allure 3 config: {config}")
    if allure is None:
        print(allure_config.not_found_message(config, results, output))
        return 1
    command = allure_config.generate_command(allure, config, results, output)
    print(f"running: {shlex.join(command)}", flush=True)
    if subprocess.run(command).returncode != 0:
        parser.exit(1, "pytest-libero report: Allure 3's generate failed (its output is above)\n")
    print(f"report: {output}\nopen it with: {shlex.join([*allure, 'open', str(output)])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
