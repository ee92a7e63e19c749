"""``isofabric-agent opensm --plan``: what a cycle would change, without installing or reporting.

Prints a unified diff per file whose sha256 differs from the installed one (the values of
``m_key``, ``sm_key`` and ``sa_key`` replaced by a short sha256 fingerprint: opensm.conf holds
the subnet's secrets), then the owners whose reachability changes (``tenant:acme``,
``service:storage``), parsed from the installed and the signed partitions.conf. The files are
downloaded and checked exactly as a cycle does (signature, sequence, sha256, strict parse), so a
plan that would be refused says so.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from agent.client import ServerError
from agent.cycle import AgentSettings, FailedError, RefusedError, Server
from agent.manifest import PARTITIONS, ManifestError, older_than, verify_manifest
from agent.prepare import prepare, read_text, text_of
from agent.state import load_state
from agent.trust import position_kept, verified
from policies.infiniband.deploy import reachability_changes
from policies.infiniband.parse_partitions import parse_partitions_conf

_SECRET_LINE = re.compile(
    r"^(?P<head>\s*(?:m_key|sm_key|sa_key)\s+)(?P<value>\S[^\n]*)(?P<end>\n?)$"
)


def plan(settings: AgentSettings, server: Server, out: Callable[[str], None]) -> int:
    """Print the plan; 0 when it could be applied, 1 when a cycle would refuse or fail."""
    try:
        envelope = server.signed_manifest()
        # A plan changes nothing: a rotation it follows is not written to the pinned keyring,
        # and a position the cycle would forget is only left out of the comparison.
        trust = replace(settings.keys, keyring_file=None)
        manifest = verified(
            trust,
            server.key_transitions,
            lambda keys: verify_manifest(envelope, keys, settings.fabric),
            out,
        )
        state = load_state(settings.conf_dir)
        held = (state.installed_position, state.installed_signer)
        older = older_than(manifest, position_kept(held, trust.entries, out)[0], "installed")
        if older is not None:
            raise RefusedError(f"the manifest's {older}")
        deployment = prepare(manifest, server, settings.conf_dir, None, lambda: 0.0)
    except (ServerError, ManifestError, RefusedError, FailedError) as error:
        out(f"refused or failed, nothing would be installed: {error}")
        return 1
    out(f"snapshot {manifest.digest}: {len(deployment.changed)} file(s) would change")
    for name in deployment.changed:
        old = read_text(settings.conf_dir / name)
        new = text_of(deployment.contents[name])
        out("".join(_diff(settings.conf_dir / name, manifest.digest, old, new)).rstrip("\n"))
    before = parse_partitions_conf(read_text(settings.conf_dir / PARTITIONS))
    owners = reachability_changes(before, deployment.parsed)
    listed = ", ".join(str(owner) for owner in owners) or "none"
    out(f"reachability changes for: {listed}")
    return 0


def _diff(path: Path, digest: str, old: str, new: str) -> Iterable[str]:
    return difflib.unified_diff(
        _masked(old), _masked(new), fromfile=str(path), tofile=f"{path.name} @ {digest}"
    )


def _masked(text: str) -> list[str]:
    """Lines with each key's value replaced by a short fingerprint (a change stays visible)."""
    return [_SECRET_LINE.sub(_fingerprint, line) for line in text.splitlines(keepends=True)]


def _fingerprint(match: re.Match[str]) -> str:
    digest = hashlib.sha256(match.group("value").encode()).hexdigest()[:8]
    return f"{match.group('head')}<secret {digest}>{match.group('end')}"
