"""Per-call round trip of our websocket client against the reference openpi client.

    python bench/wire.py                          # 300 calls each, server: pytest_libero.serve
    python bench/wire.py --server reference       # tests/openpi_reference_server.py instead
    python bench/wire.py --server both            # both servers: also compares the servers
    python bench/wire.py --calls 1000 --profile   # and where our client spends its time

Both clients are connected to the SAME local server (a separate process on
127.0.0.1 serving the zero policy) and called alternately (the order flips every
call), with the same request: two 256x256x3 uint8 images and a prompt, laid out by
our default RequestLayout (openpi's LIBERO keys). A call is timed from the caller's
side: ours is ``WebsocketPolicyClient.infer(layout.encode(observation))``, the
reference is ``openpi_client.WebsocketClientPolicy.infer(request)``; both include
packing the request and unpacking the reply.

With ``--server both`` the four client/server pairs are interleaved, which also
compares our server (``pytest_libero.serve``: the policy runs in a worker thread) with
the reference one (the policy runs inside the event loop, as upstream openpi does).
The codec table times packing and unpacking alone (no socket), for attribution.
Needs ``pip install openpi-client`` (it also imports typing_extensions); install it
with ``--no-deps`` plus ``dm-tree`` where its numpy<2 pin would downgrade numpy.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

import _common as c
import numpy as np

from harness.servers import serving

REFERENCE_SERVER = """
import sys, time
import numpy as np
sys.path.insert(0, {tests!r})
from openpi_reference_server import OpenpiReferenceServer

class _Forget(list):
    def append(self, item):  # the test server keeps every request; a benchmark must not
        pass

chunk = np.tile(np.array([0, 0, 0, 0, 0, 0, -1.0]), ({chunk}, 1))
server = OpenpiReferenceServer(lambda obs: {{"actions": chunk}}, port={port},
                               metadata={{"policy": "zero"}})
server.requests = _Forget()
server.start()
print("ready", flush=True)
while True:
    time.sleep(3600)
"""


@contextlib.contextmanager
def reference_server(chunk: int) -> Iterator[str]:
    port = c.free_port()
    code = REFERENCE_SERVER.format(tests=str(c.ROOT / "tests"), chunk=chunk, port=port)
    with serving([sys.executable, "-c", code], port, wait_s=30.0) as served:
        yield served.uri


def request_for(layout: Any) -> tuple[Any, dict[str, Any]]:
    from pytest_libero.policy.contract import Observation

    rng = np.random.default_rng(20260907)
    images = {
        camera: np.ascontiguousarray(rng.integers(0, 256, (256, 256, 3), dtype=np.uint8))
        for camera in ("agentview", "robot0_eye_in_hand")
    }
    observation = Observation(
        language="put both the alphabet soup and the tomato sauce in the basket", images=images
    )
    return observation, layout.encode(observation)


def time_us(fn: Any, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per client")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--chunk", type=int, default=5, help="actions per reply (H)")
    parser.add_argument("--server", default="serve", choices=("serve", "reference", "both"),
                        help="both: each client against each server, all interleaved")
    parser.add_argument("--profile", action="store_true", help="cProfile both clients")
    return parser.parse_args()


def main() -> int:
    args = arguments()
    from pytest_libero.policy.openpi import codec
    from pytest_libero.policy.openpi.layout import RequestLayout

    try:
        from openpi_client import msgpack_numpy
        from openpi_client.websocket_client_policy import WebsocketClientPolicy
    except ImportError as exc:
        raise SystemExit(f"needs openpi-client ({exc}); see this script's docstring") from None

    layout = RequestLayout()
    observation, request = request_for(layout)
    print(f"# wire: {args.calls} calls per client, interleaved; request 2 x 256x256x3 uint8 "
          f"+ prompt ({len(codec.pack(request))} bytes packed); reply ({args.chunk}, 7) float64; "
          f"server {args.server}")
    print(f"# {c.machine_note()}")

    names = ["serve", "reference"] if args.server == "both" else [args.server]
    with contextlib.ExitStack() as stack:
        clients, closers = connect_clients(stack, names, args.chunk, WebsocketClientPolicy,
                                           layout, observation, request)
        samples, profiles = time_clients(clients, args)
        for close in closers:
            close()

    print_round_trips(samples, names)
    print_codec(args, layout, observation, request, msgpack_numpy)
    for name, prof in profiles.items():
        print(f"\n## cProfile, {name} client, {args.calls} calls, top 14 by own time")
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(14)
        text = out.getvalue()
        print(text[text.find("   ncalls"):].rstrip())
    return 0


def connect_clients(stack: contextlib.ExitStack[Any], names: list[str], chunk: int,
                    reference_client: Any, layout: Any, observation: Any,
                    request: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """Each named server started on ``stack``, both clients connected to each: client name
    (``ours``/``reference``, with ``@server`` when there are two servers) -> one call with
    the request (ours encodes the observation itself); and how to close our clients."""
    from pytest_libero.policy.openpi.client import WebsocketPolicyClient

    clients: dict[str, Any] = {}
    closers: list[Any] = []
    for server_name in names:
        uri = stack.enter_context(
            c.zero_server(chunk=chunk) if server_name == "serve"
            else reference_server(chunk))
        ours = WebsocketPolicyClient(uri, connect_timeout=10.0, call_timeout=60.0)
        ours.connect(wait_s=10.0)
        closers.append(ours.close)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            reference = reference_client(uri)
        suffix = f"@{server_name}" if len(names) > 1 else ""
        clients["ours" + suffix] = (lambda o=ours: o.infer(layout.encode(observation)))
        clients["reference" + suffix] = (lambda r=reference: r.infer(request))
    return clients, closers


def time_clients(clients: dict[str, Any],
                 args: argparse.Namespace) -> tuple[dict[str, list[float]], dict[str, cProfile.Profile]]:
    """After a warm-up and a check that every client decodes the same reply: each client's
    call times in ms, interleaved (the order flips every call); with --profile, a cProfile
    of each over as many calls again."""
    for fn in clients.values():
        for _ in range(args.warmup):
            fn()
    replies = [fn()["actions"] for fn in clients.values()]
    assert all(np.array_equal(replies[0], r) for r in replies), "the clients decoded different replies"

    samples: dict[str, list[float]] = {name: [] for name in clients}
    for i in range(args.calls):
        for name in c.interleaved_order(list(clients), i):
            t0 = time.perf_counter()
            clients[name]()
            samples[name].append((time.perf_counter() - t0) * 1e3)

    profiles = {}
    if args.profile:
        for name, fn in clients.items():
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.calls):
                fn()
            prof.disable()
            profiles[name] = prof
    return samples, profiles


def print_round_trips(samples: dict[str, list[float]], names: list[str]) -> None:
    print()
    rows = [[name, len(v), c.median(v), c.p90(v), float(np.mean(v)), min(v)]
            for name, v in samples.items()]
    c.print_table(["client", "calls", "median ms", "p90 ms", "mean ms", "min ms"], rows)
    print()
    for server_name in names:
        suffix = f"@{server_name}" if len(names) > 1 else ""
        ours_s, ref_s = samples["ours" + suffix], samples["reference" + suffix]
        label = f" ({server_name} server)" if len(names) > 1 else ""
        print(c.ratio_line(f"median ratio ours/reference{label}", c.median(ours_s), c.median(ref_s),
                           "<= 1.0"))
        print(c.ratio_line(f"p90 ratio ours/reference{label}", c.p90(ours_s), c.p90(ref_s)))
    if len(names) > 1:
        for client in ("ours", "reference"):
            print(c.ratio_line(f"median ratio serve/reference server ({client} client)",
                               c.median(samples[f"{client}@serve"]),
                               c.median(samples[f"{client}@reference"])))


def print_codec(args: argparse.Namespace, layout: Any, observation: Any, request: dict[str, Any],
                msgpack_numpy: Any) -> None:
    """Codec alone, no socket: where the client-side microseconds go."""
    from pytest_libero.policy.openpi import codec

    reply = codec.pack({"actions": np.tile(np.array([0, 0, 0, 0, 0, 0, -1.0]), (args.chunk, 1)),
                        "server_timing": {"infer_ms": 0.01}})
    packer = msgpack_numpy.Packer()
    n = max(args.calls, 200)
    codec_rows = [
        ["pack request", c.median(time_us(lambda: codec.pack(layout.encode(observation)), n)),
         c.median(time_us(lambda: packer.pack(request), n))],
        ["unpack reply", c.median(time_us(lambda: codec.unpack(reply), n)),
         c.median(time_us(lambda: msgpack_numpy.unpackb(reply), n))],
    ]
    print()
    c.print_table(["codec step", "ours median us", "openpi median us"], codec_rows)


if __name__ == "__main__":
    raise SystemExit(main())
