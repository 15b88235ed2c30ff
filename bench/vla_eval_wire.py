"""Per-call round trip over vla-eval's wire against openpi's, the same observations and policy.

    python bench/vla_eval_wire.py                  # 300 calls per client
    python bench/vla_eval_wire.py --calls 1000

Two local servers answer zeros: vla-eval 0.8's own model server (``PredictModelServer``
started by its ``run_server``, tests/vla_eval_server.py, mode zero, asking for the wrist
image so that both wires carry the same two images) and pytest-libero's
openpi server (``python -m pytest_libero.serve --policy zero``, one action a reply, as
vla-eval answers). Three clients call them alternately (the order turns every call)
with the same observations, check-server's four golden ones (real renders: two 256x256x3
images and an instruction each, taken in turn): the vla-eval
profile's policy with PNG images (vla-eval's default) and with raw images, and the openpi
websocket policy. A call is ``policy.infer(observation)``: laying out, packing, the round
trip, unpacking and mapping the reply. The codec table times the packing alone.
Needs vla-eval (the ``test`` extra has it).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import _common as c

from harness.servers import free_port, serving, vla_eval_argv


def observations() -> list[Any]:
    """check-server's golden observations: real first renders of four scenes."""
    from pytest_libero.certify.golden import golden_observations

    return [golden.observation for golden in golden_observations(proprio=False)]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per client")
    parser.add_argument("--warmup", type=int, default=20)
    return parser.parse_args()


def main() -> int:
    args = arguments()
    from pytest_libero.policy.openpi.layout import RequestLayout
    from pytest_libero.policy.openpi.transport import WebsocketPolicy
    from pytest_libero.policy.vla_eval.client import VlaEvalPolicy
    from pytest_libero.policy.vla_eval.payload import VlaEvalLayout

    golden = observations()
    print(f"# vla-eval wire: {args.calls} calls per client, interleaved; the golden observations "
          "(2 x 256x256x3 uint8 + instruction); one 7-action reply")
    print(f"# {c.machine_note()}")
    port = free_port()
    with contextlib.ExitStack() as stack:
        vla = stack.enter_context(serving(vla_eval_argv(port, "--args.mode=zero",
                                                        "--args.wrist=true"), port,
                                          poll_s=0.2, health_path="/health")).uri
        openpi = stack.enter_context(c.zero_server(chunk=1))
        policies: dict[str, Any] = {
            f"vla-eval {form}": VlaEvalPolicy(vla, layout=VlaEvalLayout(image_format=form),
                                              connect_timeout=10.0, call_timeout=60.0, wait_s=30.0)
            for form in ("png", "raw")}
        policies["openpi"] = WebsocketPolicy(openpi, layout=RequestLayout(), connect_timeout=10.0,
                                             call_timeout=60.0, wait_s=30.0)
        for policy in policies.values():
            policy.reset()
            stack.callback(policy.close)
        samples = timed({name: partial(call, policy, golden) for name, policy in policies.items()},
                        args)
    print()
    rows = [[name, len(v), c.median(v), c.p90(v), min(v)] for name, v in samples.items()]
    c.print_table(["client", "calls", "median ms", "p90 ms", "min ms"], rows)
    print()
    for form in ("png", "raw"):
        print(c.ratio_line(f"median ratio vla-eval {form}/openpi",
                           c.median(samples[f"vla-eval {form}"]), c.median(samples["openpi"])))
    print_codec(golden[0], args.calls)
    return 0


def call(policy: Any, golden: list[Any]) -> Any:
    """One call with the next golden observation (each policy keeps its own turn)."""
    turn = getattr(policy, "_bench_turn", 0)
    policy._bench_turn = turn + 1
    return policy.infer(golden[turn % len(golden)])


def timed(calls: dict[str, Callable[[], Any]], args: argparse.Namespace) -> dict[str, list[float]]:
    """Each client's call times in ms after a warm-up, interleaved."""
    for call in calls.values():
        for _ in range(args.warmup):
            call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(args.calls):
        for name in c.interleaved_order(list(calls), i):
            started = time.perf_counter()
            calls[name]()
            samples[name].append((time.perf_counter() - started) * 1e3)
    return samples


def print_codec(seen: Any, calls: int) -> None:
    """Packing one observation alone, no socket."""
    from pytest_libero.policy.openpi import codec
    from pytest_libero.policy.openpi.layout import RequestLayout
    from pytest_libero.policy.vla_eval.payload import ServerWants, VlaEvalLayout
    from pytest_libero.policy.vla_eval.wire import pack_message

    def pack(form: str) -> Callable[[], Any]:
        payload = VlaEvalLayout().payload(seen, ServerWants(wrist=True))
        return lambda: pack_message("observation", payload, 1, image_format=form)

    steps = {"vla-eval png": pack("png"), "vla-eval raw": pack("raw"),
             "openpi": lambda: codec.pack(RequestLayout().encode(seen))}
    rows = []
    for name, step in steps.items():
        times = []
        for _ in range(max(calls // 3, 50)):
            started = time.perf_counter()
            data = step()
            times.append((time.perf_counter() - started) * 1e3)
        rows.append([name, c.median(times), len(data)])
    print()
    c.print_table(["pack an observation (both images)", "median ms", "bytes"], rows)


if __name__ == "__main__":
    raise SystemExit(main())
