"""Our packaging metadata builds without a warning and names the licence the LICENSE file holds.

A deprecated form in pyproject.toml (such as the table form of `license`, which setuptools warns
about on every install) fails here: the metadata is built with every warning turned into an error.
"""

from __future__ import annotations

import subprocess
import sys
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_metadata(out: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import setuptools.build_meta as b, sys; "
        "print(b.prepare_metadata_for_build_wheel(sys.argv[1]))"
    )
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", code, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_metadata_builds_with_warnings_as_errors_and_names_the_licence(tmp_path: Path) -> None:
    result = build_metadata(tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    dist_info = tmp_path / result.stdout.strip().splitlines()[-1]
    metadata = Parser().parsestr((dist_info / "METADATA").read_text())
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License-File"] == "LICENSE"
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert (dist_info / "licenses" / "LICENSE").read_text() == licence
