"""Throughput of one policy server for 1, 4 and 8 concurrent clients, with and without
batching.

    python bench/serving.py                                 # 20 ms + 2 ms per item, 3 repeats of 3 s
    python bench/serving.py --fixed-ms 50 --item-ms 1 --repeats 5 --seconds 5 --wait-ms 5

The policy is synthetic: a call sleeps ``fixed_ms`` plus ``item_ms`` per observation
it answers, the shape of a GPU forward pass whose cost barely grows with the batch.
Three ``python -m pytest_libero.serve`` processes run side by side: one serves it
without ``infer_batch`` (calls run one at a time), one with it under the defaults
(``--max-batch 16 --batch-wait-ms 0``: a batch takes whatever waits when the policy is
free), one with it and ``--batch-wait-ms`` set to ``--wait-ms``. Each client is a
thread with its own ``WebsocketPolicyClient`` (one episode, one connection) sending
two 256x256x3 images and a prompt, call after call, for ``--seconds``; throughput is
all clients' replies per second. The nine variants are interleaved, the order
rotating each repeat; ratios are taken per repeat (paired) and reported as median and
range.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import _common as c
import numpy as np

from harness.servers import serve_argv, serving

BENCH_DIR = Path(__file__).resolve().parent
CLIENTS = (1, 4, 8)


class Synthetic:
    """Sleeps ``fixed_ms + item_ms`` per call; stateless apart from a call counter."""

    def __init__(self, fixed_ms: float = 20.0, item_ms: float = 2.0) -> None:
        self.fixed_s, self.item_s = fixed_ms / 1000, item_ms / 1000
        self.metadata: Mapping[str, Any] = {"policy": "synthetic", "fixed_ms": fixed_ms,
                                            "item_ms": item_ms}
        self.calls = 0

    def reset(self) -> None:
        self.calls = 0

    def infer(self, observation: Any) -> Mapping[str, Any]:
        time.sleep(self.fixed_s + self.item_s)
        self.calls += 1
        return {"actions": np.tile([0.0, 0, 0, 0, 0, 0, -1], (5, 1))}

    def close(self) -> None:
        pass


class SyntheticBatch(Synthetic):
    """The same cost model, with ``infer_batch``: one sleep for the whole batch."""

    def infer_batch(self, observations: Sequence[Any], episodes: Sequence[Any]) -> list[Any]:
        time.sleep(self.fixed_s + self.item_s * len(observations))
        replies = []
        for episode in episodes:
            episode.calls += 1
            replies.append({"actions": np.tile([0.0, 0, 0, 0, 0, 0, -1], (5, 1))})
        return replies


def make(fixed_ms: float = 20.0, item_ms: float = 2.0, batch: bool = False) -> Synthetic:
    """The serving factory: ``--policy serving:make --option batch=true``."""
    return (SyntheticBatch if batch else Synthetic)(fixed_ms, item_ms)


@contextlib.contextmanager
def server(args: argparse.Namespace, batch: bool, wait_ms: float = 0.0) -> Iterator[str]:
    port = c.free_port()
    argv = serve_argv("serving:make", port, options=[
        f"fixed_ms={args.fixed_ms}", f"item_ms={args.item_ms}", f"batch={str(batch).lower()}",
    ], flags=["--batch-wait-ms", str(wait_ms)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH_DIR), str(c.ROOT)])}
    with serving(argv, port, env=env, cwd=c.ROOT) as served:
        yield served.uri


def measure(uri: str, clients: int, seconds: float, request: dict[str, Any]) -> dict[str, float]:
    """``clients`` connections calling in a loop for ``seconds``: replies per second."""
    from pytest_libero.policy.openpi.client import WebsocketPolicyClient

    connections = [WebsocketPolicyClient(uri, connect_timeout=10, call_timeout=60)
                   for _ in range(clients)]
    for connection in connections:
        connection.connect(wait_s=10)
        connection.infer(request)  # warm: the episode's object exists and is reset
    counts = [0] * clients
    batches: list[list[int]] = [[] for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    deadline = [0.0]

    def loop(index: int) -> None:
        start.wait()
        while time.perf_counter() < deadline[0]:
            reply = connections[index].infer(request)
            counts[index] += 1
            batches[index].append(int(reply["server_timing"]["batch"]))

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    deadline[0] = time.perf_counter() + seconds
    t0 = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - t0
    for connection in connections:
        connection.close()
    sizes = [size for sizes in batches for size in sizes]
    return {"per_s": sum(counts) / wall, "batch": sum(sizes) / len(sizes) if sizes else 0.0}


def spread(values: Sequence[float]) -> str:
    return f"{c.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fixed-ms", type=float, default=20.0)
    parser.add_argument("--item-ms", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--wait-ms", type=float, default=2.0, help="--batch-wait-ms of the third server")
    args = parser.parse_args()

    from pytest_libero.policy.contract import Observation
    from pytest_libero.policy.openpi.layout import RequestLayout

    rng = np.random.default_rng(20260907)
    images = {camera: rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
              for camera in ("agentview", "robot0_eye_in_hand")}
    request = RequestLayout().encode(Observation("put the bowl on the plate", images))
    print(f"# serving: synthetic policy {args.fixed_ms:g} ms + {args.item_ms:g} ms per item, "
          f"clients {CLIENTS}, {args.repeats} repeats of {args.seconds:g} s")
    print(f"# {c.machine_note()}")
    waited = f"infer_batch, wait {args.wait_ms:g} ms"
    modes = ("one at a time", "infer_batch", waited)
    names = [(mode, n) for mode in modes for n in CLIENTS]
    runs: dict[tuple[str, int], list[dict[str, float]]] = {name: [] for name in names}
    with (server(args, batch=False) as plain, server(args, batch=True) as batched,
          server(args, batch=True, wait_ms=args.wait_ms) as patient):
        uris = dict(zip(modes, (plain, batched, patient), strict=True))
        for repeat in range(args.repeats):
            shift = repeat % len(names)  # c.interleaved_order, for (mode, clients) pairs
            for mode, clients in names[shift:] + names[:shift]:
                out = measure(uris[mode], clients, args.seconds, request)
                runs[mode, clients].append(out)
                print(f"#   repeat {repeat + 1} {mode}, {clients} client(s): "
                      f"{out['per_s']:.1f}/s, mean batch {out['batch']:.2f}", flush=True)
    print()
    ideal = 1000 / (args.fixed_ms + args.item_ms)
    c.print_table(
        ["server", "clients", "replies/s (median)", "range", "mean batch", "vs 1 client"],
        [[mode, n, c.median([o["per_s"] for o in runs[mode, n]]),
          f"{min(o['per_s'] for o in runs[mode, n]):.1f}-{max(o['per_s'] for o in runs[mode, n]):.1f}",
          c.median([o["batch"] for o in runs[mode, n]]),
          spread([o["per_s"] / b["per_s"] for o, b in zip(runs[mode, n], runs[mode, 1], strict=True)])]
         for mode, n in names],
    )
    print()
    print(f"one call alone: {args.fixed_ms + args.item_ms:g} ms, so {ideal:.1f} replies/s one at a time")
    for mode in modes[1:]:
        for n in CLIENTS:
            paired = [b["per_s"] / p["per_s"] for b, p in
                      zip(runs[mode, n], runs["one at a time", n], strict=True)]
            print(f"{mode} / one at a time, {n} client(s) = {spread(paired)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
