"""Fixtures the agent tests share."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tenancy.store.key_store import public_pem

UNREACHABLE = "http://127.0.0.1:1"  # nothing listens on port 1


@pytest.fixture
def base(tmp_path: Path) -> list[str]:
    """`isofabric-agent opensm` with every required option, against `UNREACHABLE` (no token)."""
    key = tmp_path / "service.pub"
    key.write_text(public_pem(Ed25519PrivateKey.generate().public_key()))
    conf = tmp_path / "conf"
    conf.mkdir()
    return [
        "opensm", "--server", UNREACHABLE, "--fabric", "ib-east", "--target", "sm01",
        "--conf-dir", str(conf), "--public-key", str(key), "--log-file", str(conf / "opensm.log"),
        "--pid-file", str(conf / "opensm.pid"),
    ]  # fmt: skip
