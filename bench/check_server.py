"""Wall time of ``pytest-libero check-server`` against each wire's local server.

    python bench/check_server.py              # 3 runs per server
    python bench/check_server.py --runs 5

Servers: pytest-libero's own (``pytest_libero.serve --policy zero``, openpi's wire) and
vla-eval 0.8's own model server (tests/vla_eval_server.py), each started once; every run
is the whole command as a user types it (a new process: imports, preflight, the thirteen
checks, the certificate). The issue's target: under a minute against a responsive server.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as c

from harness.servers import free_port, serve_argv, serving, vla_eval_argv


def timed(profile: str, endpoint: str, runs: int) -> list[float]:
    took = []
    with tempfile.TemporaryDirectory(prefix="check-server-bench-") as folder:
        for _ in range(runs):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "check-server",
                                   "--profile", profile, "--endpoint", endpoint, "--deterministic",
                                   "--out", str(Path(folder) / "certificate.json"), "--", "-q"],
                                  capture_output=True, text=True, check=False)
            took.append(time.perf_counter() - started)
            if done.returncode != 0:
                raise SystemExit(f"check-server exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"# check-server wall time, {args.runs} runs per server")
    print(f"# {c.machine_note()}")
    rows = []
    port = free_port()
    with serving(serve_argv("zero", port, flags=["--host", "127.0.0.1"]), port, poll_s=0.2) as served:
        rows.append(["openpi wire (pytest_libero.serve, zero)",
                     *summary(timed("pi05", served.uri, args.runs))])
    port = free_port()
    with serving(vla_eval_argv(port), port, poll_s=0.2, health_path="/health") as served:
        rows.append(["vla-eval wire (vla-eval's server, probe)",
                     *summary(timed("vla-eval", served.uri, args.runs))])
    print()
    c.print_table(["server", "median s", "max s"], rows)
    return 0


def summary(took: list[float]) -> list[float]:
    return [round(c.median(took), 2), round(max(took), 2)]


if __name__ == "__main__":
    raise SystemExit(main())
