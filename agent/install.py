"""Install a file atomically beside the running OpenSM, keeping the previous generation.

OpenSM re-reads partitions.conf at any heavy sweep (traps, topology changes, SIGHUP), and a
missing, empty or half-written file makes it fall back to ``Default=0x7fff : ALL=full``. So a
target file is only ever replaced by ``rename()`` of a complete, fsynced file from the same
directory; at no instant is it missing, empty or partial. Steps of `install_file`:

1. ``tmp-written``: ``.<name>.isofabric-tmp`` written and fsynced;
2. ``prev-kept``: the current file hard-linked (or copied) to ``<name>.prev`` (through a
   temporary name and a rename, so ``.prev`` too is always whole), directory fsynced;
3. ``renamed``: the temporary file renamed onto ``<name>``;
4. the directory fsynced.

Tests observe the steps: with ``ISOFABRIC_AGENT_PAUSE_AT=<step>`` the agent prints
``isofabric-agent: paused at <step>`` on stderr and sleeps there (``ISOFABRIC_AGENT_PAUSE_SECONDS``,
default 60), so a test can ``kill -9`` it at that instant. Steps outside this module: ``fetched``
(manifest verified), ``downloaded`` (files checked), ``installed`` (every file in place, before
the SIGHUP). Not for production use.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

PAUSE_ENV = "ISOFABRIC_AGENT_PAUSE_AT"
PAUSE_SECONDS_ENV = "ISOFABRIC_AGENT_PAUSE_SECONDS"
DEFAULT_PAUSE_SECONDS = 60.0
TMP_SUFFIX = ".isofabric-tmp"
PREV_SUFFIX = ".prev"
NEW_FILE_MODE = 0o600


def pause_point(step: str) -> None:
    """Sleep at `step` if ``ISOFABRIC_AGENT_PAUSE_AT`` names it (tests kill the agent there)."""
    if os.environ.get(PAUSE_ENV) != step:
        return
    sys.stderr.write(f"isofabric-agent: paused at {step}\n")
    sys.stderr.flush()
    time.sleep(float(os.environ.get(PAUSE_SECONDS_ENV, DEFAULT_PAUSE_SECONDS)))


def sha256_of(path: Path) -> str | None:
    """Hex sha256 of the file at `path`, or None when there is no such file."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def tmp_path(target: Path) -> Path:
    """The scratch file `install_file` writes before renaming it onto `target`."""
    return target.with_name(f".{target.name}{TMP_SUFFIX}")


def prev_path(target: Path) -> Path:
    """Where the generation `target` replaced is kept."""
    return target.with_name(target.name + PREV_SUFFIX)


def fsync_dir(directory: Path) -> None:
    """Make the directory's entries (renames, links) durable."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_synced(path: Path, content: bytes, mode: int) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(path, mode)  # an existing scratch file keeps its mode otherwise


def _keep_previous(target: Path) -> None:
    """Link (or copy) `target` to ``<name>.prev`` through a scratch name and a rename."""
    scratch = tmp_path(prev_path(target))
    scratch.unlink(missing_ok=True)
    try:
        os.link(target, scratch)
    except OSError:  # a file system without hard links
        shutil.copy2(target, scratch)
        with scratch.open("rb") as handle:
            os.fsync(handle.fileno())
    os.replace(scratch, prev_path(target))


def install_file(target: Path, content: bytes, *, keep_previous: bool = True) -> None:
    """Replace `target` with `content` atomically, keeping the old file as ``<name>.prev``.

    The new file keeps the old one's mode, or is 0600 (opensm.conf holds the subnet's keys). A
    crash at any point leaves `target` either old or new, whole; a stale scratch file is
    overwritten next time. Without `keep_previous`, ``.prev`` is left as it is (an intermediate
    generation, such as FRR's new-VRFs step, is not one to go back to).
    """
    directory = target.parent
    scratch = tmp_path(target)
    mode = target.stat().st_mode & 0o777 if target.exists() else NEW_FILE_MODE
    _write_synced(scratch, content, mode)
    pause_point("tmp-written")
    if keep_previous and target.exists():
        _keep_previous(target)
        fsync_dir(directory)
    pause_point("prev-kept")
    os.replace(scratch, target)
    pause_point("renamed")
    fsync_dir(directory)


def restore_previous(target: Path) -> bool:
    """Put ``<name>.prev`` back onto `target` atomically (``.prev`` stays); False if none."""
    previous = prev_path(target)
    if not previous.exists():
        return False
    _write_synced(tmp_path(target), previous.read_bytes(), previous.stat().st_mode & 0o777)
    os.replace(tmp_path(target), target)
    fsync_dir(target.parent)
    return True
