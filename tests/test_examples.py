"""examples/ run as tests so they cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_verify_fabric_example_reports_isolation_and_renders_partitions():
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "verify_fabric.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=EXAMPLES.parent,
    )

    assert result.returncode == 0, result.stderr
    assert "isolation holds" in result.stdout
    assert "tenant:acme <-> service:storage via 0x0100 allowed=True" in result.stdout
    assert "tenant_acme=0x0101, ipoib, mtu=4, rate=3, sl=3 :" in result.stdout
    assert "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;" in result.stdout
