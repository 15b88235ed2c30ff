"""Profiles: shipped ones load; every bad key is named with what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_libero.config.profiles import builtin_names, load_profile, parse_profile
from pytest_libero.protocol.errors import SetupError

MINIMAL = b"""
name = "m"
[policy]
factory = "pytest_libero.policy.builtin:ZeroPolicy"
"""


def test_shipped_profiles_load_and_build() -> None:
    assert {"zero", "random", "replay"} <= set(builtin_names())
    for name in ("zero", "random"):
        profile = load_profile(name)
        assert profile.infrastructure and profile.name == name
        policy = profile.build_policy()
        assert policy.metadata["policy"] == name


def test_defaults() -> None:
    profile = parse_profile(MINIMAL, "t.toml")
    assert (profile.track, profile.budget_mode, profile.replan_interval) == ("rgb", "horizon", 5)
    assert profile.max_policy_calls == 200 and profile.stop_rule.consecutive is None
    assert not profile.infrastructure and len(profile.sha256) == 64


@pytest.mark.parametrize(
    ("top", "table", "words"),
    [
        (b'track = "depth"\n', b"", "track is 'depth'; allowed: rgb, rgb+proprio"),
        (b"colour = 1\n", b"", "colour is not a known key"),
        (b"", b'[budget]\nmode = "steps"\n', "budget.mode is 'steps'; allowed: horizon, decisions"),
        (b"", b"[budget]\nreplan_interval = 0\n", "budget.replan_interval is 0; allowed: an integer >= 1"),
        (b"", b"[stop]\nconsecutive = -1\n", "stop.consecutive is -1"),
        (b"", b"[stop]\nafter = 2\n", "stop.after is not a known key"),
        (b"", b'[action]\nout_of_bounds = "wrap"\n', "action.out_of_bounds is 'wrap'; allowed: error, clip"),
        (b"", b"[action]\nclip = true\n", "action.clip is not a known key"),
    ],
)
def test_bad_keys_are_named(top: bytes, table: bytes, words: str) -> None:
    with pytest.raises(SetupError) as info:
        parse_profile(top + MINIMAL + table, "bad.toml")
    assert words in str(info.value) and "bad.toml" in str(info.value)


def test_unreadable_and_missing() -> None:
    with pytest.raises(SetupError, match="not valid TOML"):
        parse_profile(b"name = ", "x.toml")
    with pytest.raises(SetupError, match="policy is missing"):
        parse_profile(b'name = "x"\n', "x.toml")
    with pytest.raises(SetupError, match="shipped: .*zero"):
        load_profile("no-such-model")
    with pytest.raises(SetupError, match="no profile file"):
        load_profile("/nonexistent/p.toml")


def test_profile_from_path_and_option_overrides(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_bytes(MINIMAL + b'[policy.options]\nchunk = 2\n')
    profile = load_profile(str(path)).with_overrides(options={"chunk": 3})
    assert profile.source == str(path.resolve())
    assert profile.build_policy().chunk == 3


def test_bad_factory_is_a_setup_error() -> None:
    profile = parse_profile(MINIMAL.replace(b"ZeroPolicy", b"Nope"), "f.toml")
    with pytest.raises(SetupError, match="cannot be imported"):
        profile.build_policy()
    replay = load_profile("replay")
    with pytest.raises(SetupError, match="actions=PATH"):
        replay.build_policy()


def test_out_of_bounds_is_strict_unless_declared_or_overridden() -> None:
    assert parse_profile(MINIMAL, "t.toml").out_of_bounds == "error"
    declared = parse_profile(MINIMAL + b'[action]\nout_of_bounds = "clip"\n', "t.toml")
    assert declared.out_of_bounds == "clip" and declared.identity()["out_of_bounds"] == "clip"
    assert declared.with_overrides(out_of_bounds="error").out_of_bounds == "error"
    with pytest.raises(SetupError, match="--libero-out-of-bounds='wrap'; allowed: error, clip"):
        declared.with_overrides(out_of_bounds="wrap")
    # openpi's checkpoints un-normalize with quantiles and overshoot a little: their
    # profiles clip (and say why); the bridged profiles stay strict.
    assert {n: load_profile(n).out_of_bounds for n in ("pi0", "pi05", "smolvla", "openvla-oft")} \
        == {"pi0": "clip", "pi05": "clip", "smolvla": "error", "openvla-oft": "error"}


def test_websocket_profiles_say_how_to_start_their_server() -> None:
    for name in ("pi0", "pi05", "smolvla", "openvla-oft"):
        assert "--port" in load_profile(name).start_hint or "serve_policy.py" in load_profile(name).start_hint
    generic = parse_profile(b'name = "w"\n[policy]\ntransport = "websocket"\n', "w.toml")
    assert "python -m pytest_libero.serve" in generic.start_hint
