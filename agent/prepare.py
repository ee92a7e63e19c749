"""Before anything is installed: download and check the files, and check the running OpenSM.

* Files: the changed ones are downloaded by snapshot digest, the unchanged ones read from the
  conf dir; each must have the signed manifest's sha256 and size. partitions.conf is parsed with
  the project's strict parser; any critical finding (a fail-open hazard or a silent change of
  isolation) refuses the deployment.
* OpenSM: its command line must name the files in the conf dir (else installing changes
  nothing); the restart-only options of the new opensm.conf are compared with those it was
  started with (recorded when the agent first saw its process, agent/state.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from agent.client import ServerError
from agent.cycle import Deployment, FailedError, RefusedError, Server
from agent.install import pause_point, prev_path, sha256_of
from agent.manifest import OPTIONS, PARTITIONS, Manifest
from agent.sm import SmProcess
from agent.state import AgentState, Pending, StartedWith
from policies.findings import Severity
from policies.infiniband.opensm_conf import (
    management_keys,
    opensm_file_paths,
    opensm_options,
    restart_only_options,
    restart_option_changes,
)
from policies.infiniband.parse_partitions import parse_partitions_conf

# btime's resolution (1 s) plus a clock tick: the error bound of `SmProcess.started_at`.
START_TIME_SLACK = 1.01


def prepare(
    manifest: Manifest,
    server: Server,
    conf_dir: Path,
    pending: Pending | None,
    clock: Callable[[], float],
) -> Deployment:
    """Download and check every file of `manifest`; the models of the new and replaced files.

    Raises:
        RefusedError: a sha256 or size differs from the manifest, or partitions.conf has a
            critical finding.
        FailedError: a download failed.
    """
    mark = clock()
    changed = [f.name for f in manifest.files if sha256_of(conf_dir / f.name) != f.sha256]
    contents = {
        f.name: _checked(manifest, f.name, _fetch(manifest, f.name, changed, server, conf_dir))
        for f in manifest.files
    }
    durations = {"download": clock() - mark}
    pause_point("downloaded")
    parsed = parse_partitions_conf(text_of(contents[PARTITIONS]))
    critical = [f for f in parsed.findings if f.severity is Severity.CRITICAL]
    if critical:
        first = critical[0]
        raise RefusedError(
            f"partitions.conf refused ({len(critical)} critical finding(s)): line "
            f"{first.line}: {first.code}: {first.message}"
        )
    replaced = read_text(_replaced_partitions(manifest, changed, conf_dir, pending))
    options = options_text(contents, conf_dir)
    deployment = Deployment(manifest, contents, changed, parsed, parse_partitions_conf(replaced))
    deployment.m_key, deployment.durations = management_keys(options)[0], durations
    return deployment


def _fetch(
    manifest: Manifest, name: str, changed: list[str], server: Server, conf_dir: Path
) -> bytes:
    entry = manifest.file(name)
    assert entry is not None
    if name not in changed:
        return (conf_dir / name).read_bytes()
    try:
        return server.artifact(manifest.digest, entry.path)
    except ServerError as error:
        raise FailedError(f"download of {entry.path} failed: {error}") from error


def _checked(manifest: Manifest, name: str, data: bytes) -> bytes:
    entry = manifest.file(name)
    assert entry is not None
    actual = hashlib.sha256(data).hexdigest()
    if actual != entry.sha256 or len(data) != entry.size:
        raise RefusedError(
            f"{entry.path}: sha256 {actual} ({len(data)} bytes) does not match the signed "
            f"manifest's {entry.sha256} ({entry.size} bytes); nothing installed, tried again "
            "next cycle",
            lasting=False,
        )
    return data


def _replaced_partitions(
    manifest: Manifest, changed: list[str], conf_dir: Path, pending: Pending | None
) -> Path:
    """The partitions.conf this deployment replaces.

    The installed one, or its ``.prev`` when an interrupted cycle already installed this one's.
    """
    target = conf_dir / PARTITIONS
    resumed = pending is not None and pending.digest == manifest.digest
    if PARTITIONS not in changed and resumed and pending and PARTITIONS in pending.files:
        return prev_path(target)
    return target


def observe(process: SmProcess | None, state: AgentState) -> bool:
    """Record the restart-only options of a newly seen OpenSM process; True if recorded.

    OpenSM applied its options file when it started. The file as it is when the agent first sees
    the process is the best evidence of them; if it was modified after the start, nobody can
    know better, and `StartedWith.conf_newer` says so.
    """
    known = state.started_with
    if process is None or (known and (known.pid, known.start_ticks) == identity(process)):
        return False
    conf = resolve(process, opensm_file_paths(process.argv, {})[OPTIONS])
    # /proc/stat's btime is whole seconds (rounded down), so `started_at` can be up to a second
    # early: a file written just before the start must not look newer than it.
    newer = conf.exists() and conf.stat().st_mtime > process.started_at + START_TIME_SLACK
    options = restart_only_options(read_text(conf))
    state.started_with = StartedWith(process.pid, process.start_ticks, options, newer)
    return True


def check_opensm(
    deployment: Deployment, process: SmProcess, started: StartedWith, conf_dir: Path
) -> None:
    """Refuse to install when OpenSM reads its files elsewhere; note restart-only changes.

    Raises:
        FailedError: a file of the manifest is not the one OpenSM reads.
    """
    new_options = options_text(deployment.contents, conf_dir)
    qos = {"qos": opensm_options(new_options).get("qos", "")}
    for name, path in opensm_file_paths(process.argv, {**started.options, **qos}).items():
        in_manifest = deployment.manifest.file(name) is not None
        if (
            path is not None
            and in_manifest
            and resolve(process, path) != (conf_dir / name).resolve()
        ):
            raise FailedError(
                f"OpenSM (pid {process.pid}) reads {name} from {path}, not from {conf_dir}: "
                "installing there would change nothing (start it with -F/-P/-Y naming the "
                "files in the conf dir); nothing installed"
            )
    deployment.process = process
    deployment.restart = restart_option_changes(started.options, restart_only_options(new_options))
    if started.conf_newer:
        deployment.notes.append(
            f"opensm.conf was modified after OpenSM (pid {process.pid}) started: the options it "
            "runs with are taken from the file as the agent first saw it"
        )


def options_text(contents: dict[str, bytes], conf_dir: Path) -> str:
    """The opensm.conf being deployed: the manifest's, else the installed one."""
    return text_of(contents[OPTIONS]) if OPTIONS in contents else read_text(conf_dir / OPTIONS)


def identity(process: SmProcess | None) -> tuple[int | None, int | None]:
    """(pid, start ticks): a restarted or recycled pid is another process."""
    return (process.pid, process.start_ticks) if process is not None else (None, None)


def resolve(process: SmProcess, path: str | None) -> Path:
    """A path of OpenSM's command line, relative to its working directory."""
    return (process.cwd / (path or "")).resolve()


def text_of(data: bytes) -> str:
    """File bytes as text (undecodable bytes kept, so the parser sees and reports them)."""
    return data.decode("utf-8", errors="surrogateescape")


def read_text(path: Path) -> str:
    """The file's text, "" when it does not exist."""
    try:
        return text_of(path.read_bytes())
    except FileNotFoundError:
        return ""
