"""Golden files: rendered artifacts compared byte for byte with a reviewed copy.

The reviewed copies live in ``tests/policies/golden/``. To regenerate them deliberately, run the
renderer tests with ``UPDATE_GOLDEN=1`` (for example
``UPDATE_GOLDEN=1 .venv/bin/pytest tests/policies/test_render_opensm.py``) and review the diff
like code before committing it.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent / "policies" / "golden"
UPDATE_ENV = "UPDATE_GOLDEN"


def updating() -> bool:
    """Whether this run rewrites golden files instead of comparing with them."""
    return os.environ.get(UPDATE_ENV) == "1"


def assert_golden(name: str, text: str, *, directory: Path = GOLDEN_DIR) -> None:
    """`text` equals ``<directory>/<name>`` byte for byte (UTF-8, no newline translation).

    With ``UPDATE_GOLDEN=1`` the file is rewritten first, so the comparison then holds.
    """
    path = directory / name
    actual = text.encode()
    if updating():
        path.write_bytes(actual)
    if not path.exists():
        raise AssertionError(f"no golden file {path}; create it with {UPDATE_ENV}=1 and review it")
    expected = path.read_bytes()
    if actual != expected:
        diff = difflib.unified_diff(
            expected.decode(errors="replace").splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=f"golden/{name}",
            tofile="rendered",
        )
        raise AssertionError(
            f"rendered text differs from golden/{name} (rerun with {UPDATE_ENV}=1 to accept, "
            "then review the diff):\n" + "".join(diff)
        )
