"""P12: the protocol identity is pinned; only a deliberate protocol change may move it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_libero.protocol.hashing import canonical_json, sha256_bytes
from pytest_libero.protocol.identity import protocol_identity
from pytest_libero.protocol.parameters import protocol_parameters

# Changing this value is a protocol change: say so in the commit and the changelog.
GOLDEN = "libero-protocol-v1:3bbf69ed0165df6faf45b4123da1da75"
GOLDEN_FULL = "libero-protocol-full-v1:c9353e1f75a528de41881727ac107769"


def test_protocol_identity_is_pinned() -> None:
    assert protocol_identity() == protocol_identity("fast") == GOLDEN


def test_full_mode_has_its_own_identity() -> None:
    assert protocol_identity("full") == GOLDEN_FULL
    with pytest.raises(ValueError, match="no protocol identity for mode 'quick'"):
        protocol_identity("quick")


def test_identity_moves_when_a_parameter_moves() -> None:
    params = protocol_parameters()
    changed = protocol_parameters()
    changed["environment"]["settle_controls"] = 5  # type: ignore[index]
    assert sha256_bytes(canonical_json(params)) != sha256_bytes(canonical_json(changed))
    assert canonical_json(params) == canonical_json(protocol_parameters())


def test_package_is_typed_and_mypy_strict_clean() -> None:
    root = Path(__file__).resolve().parents[1]
    assert (root / "pytest_libero" / "py.typed").is_file()
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
