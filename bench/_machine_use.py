"""How busy the machine's CPU cores and GPU are while a command runs: sampled, not guessed.

CPU: the busy share of every core from /proc/stat, between samples (all processes, the
renderer's threads and the encoders included). GPU: ``nvidia-smi``'s memory in use and
utilisation, where it exists. A sampler thread reads both every ``period_s`` seconds;
``summary`` gives the means and peaks that say where a run's limit lies.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

CPU_BOUND = 0.85
"""A mean busy share of the cores at or above this: the cores are the limit."""
GPU_BOUND = 85.0
"""A mean GPU utilisation (percent) at or above this: the GPU is the limit."""


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all cores together, from /proc/stat's first line."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def gpu_reading() -> tuple[float, float] | None:
    """(memory used in MiB, utilisation in percent) of GPU 0, or None without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    done = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,utilization.gpu",
                           "--format=csv,noheader,nounits", "-i", "0"],
                          capture_output=True, text=True, timeout=10, check=False)
    try:
        memory, utilisation = (float(x) for x in done.stdout.strip().split(","))
    except ValueError:
        return None
    return memory, utilisation


class UseSampler:
    """``with UseSampler() as use: run()``; then ``use.summary()``."""

    def __init__(self, period_s: float = 0.5) -> None:
        self.period_s = period_s
        self.cores = os.cpu_count() or 1
        self.cpu: list[float] = []
        self.gpu: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> UseSampler:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _sample(self) -> None:
        before = cpu_times()
        while not self._stop.wait(self.period_s):
            now = cpu_times()
            if now[1] > before[1]:
                self.cpu.append((now[0] - before[0]) / (now[1] - before[1]))
            before = now
            reading = gpu_reading()
            if reading is not None:
                self.gpu.append(reading)

    def summary(self) -> dict[str, Any]:
        """Mean and peak busy cores, peak GPU memory, mean and peak GPU utilisation, and
        the limit they point to: "CPU cores", "GPU" or "the pipe" (neither saturated:
        each worker's own serial chain of set-up, physics, rendering and policy)."""
        cpu_mean = statistics.fmean(self.cpu) if self.cpu else float("nan")
        found: dict[str, Any] = {
            "cores": self.cores,
            "cpu_busy_mean": cpu_mean,
            "cpu_busy_peak": max(self.cpu, default=float("nan")),
            "gpu_memory_peak_mib": max((m for m, _ in self.gpu), default=None),
            "gpu_util_mean": statistics.fmean(u for _, u in self.gpu) if self.gpu else None,
            "gpu_util_peak": max((u for _, u in self.gpu), default=None),
        }
        if found["gpu_util_mean"] is not None and found["gpu_util_mean"] >= GPU_BOUND:
            found["limit"] = "GPU"
        elif cpu_mean >= CPU_BOUND:
            found["limit"] = "CPU cores"
        else:
            found["limit"] = "the pipe"
        return found
