"""Transports behind one interface: each implements all of it, profiles ask it, and no
code outside a transport's own module tests a transport's name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pytest_libero.config.profiles import load_profile, parse_profile
from pytest_libero.policy.transport import TRANSPORT_NAMES, Transport, transport_named
from pytest_libero.protocol.errors import SetupError

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_libero"
TRANSPORT_MODULES = {"policy/transport.py", "policy/builtin/factory.py",
                     "policy/openpi/transport.py", "policy/gr00t/transport.py"}
PROFILES = PACKAGE / "data" / "profiles"


@pytest.mark.parametrize("name", TRANSPORT_NAMES)
def test_each_transport_implements_the_whole_interface(name: str) -> None:
    transport = transport_named(name)
    assert transport.name == name
    members = [m for m in dir(Transport) if not m.startswith("_")]
    members += list(Transport.__annotations__)
    assert members and all(hasattr(transport, m) for m in members), \
        [m for m in members if not hasattr(transport, m)]
    assert bool(transport.schemes) == transport.served


def names_compared(tree: ast.AST) -> list[tuple[int, str]]:
    """Where a transport's name is compared with something (==, !=, in)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for part in (node.left, *node.comparators):
                values = (part.elts if isinstance(part, (ast.Tuple, ast.List, ast.Set))
                          else [part])
                found += [(node.lineno, v.value) for v in values
                          if isinstance(v, ast.Constant) and v.value in TRANSPORT_NAMES]
    return found


def test_no_code_outside_a_transport_branches_on_its_name() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in TRANSPORT_MODULES:
            continue
        offenders += [f"{relative}:{line} compares with {name!r}"
                      for line, name in names_compared(ast.parse(path.read_text()))]
    assert offenders == []


def test_the_check_itself_finds_a_branch() -> None:
    tree = ast.parse("if profile.transport == 'gr00t' or t in ('websocket', 'x'): pass")
    assert [name for _, name in names_compared(tree)] == ["gr00t", "websocket"]


@pytest.mark.parametrize(("profile", "insert", "words"), [
    ("pi05", '[policy]\nwire = "npy"', r"policy\.wire is set; allowed: only with transport = 'gr00t'"),
    ("pi05", '[policy]\napi_token_env = "X"', r"policy\.api_token_env is set; .*'gr00t'"),
    ("zero", '[policy]\nendpoint = "ws://127.0.0.1:1"',
     r"policy\.endpoint is set; allowed: only with transport = 'websocket' or 'gr00t'"),
    ("gr00t", '[policy]\nfactory = "m:f"', r"policy\.factory is set; .*'inprocess'"),
    ("gr00t", '[launch]\ncommand = ["x"]\n[policy]', r"launch is set; .*'websocket'"),
    ("pi05", '[reply]\nactions = []\n[policy]', r"reply is set; .*'gr00t'"),
    ("pi05", '[policy]\nflavour = "x"', r"policy\.flavour is not a known key"),
])
def test_a_key_another_transport_reads_is_refused_naming_it(profile: str, insert: str,
                                                            words: str) -> None:
    text = (PROFILES / f"{profile}.toml").read_text().replace("[policy]", insert, 1)
    with pytest.raises(SetupError, match=words):
        parse_profile(text.encode(), "x.toml")


def test_identity_keeps_its_keys_for_every_transport() -> None:
    """run.json's profile identity has one shape whatever the transport."""
    keys = {name: set(load_profile(name).identity()) for name in ("zero", "pi05", "gr00t")}
    assert keys["zero"] == keys["pi05"] == keys["gr00t"] - {"wire"}
    assert load_profile("zero").identity()["factory"] == "pytest_libero.policy.builtin:ZeroPolicy"
    assert load_profile("pi05").identity()["request_layout"]["language"] == "prompt"
    assert load_profile("gr00t").policy_label == "tcp://127.0.0.1:5555"
