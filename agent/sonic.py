"""One cycle of the SONiC leaf agent (``isofabric-agent sonic``).

A cycle: fetch the signed manifest and verify it with the pinned keys (a position older than the
last applied one, kept in ``--state-dir``, is refused); read ``sync`` and act only when its
``desired`` is the manifest's digest, in the phase it publishes; download this leaf's files by
snapshot digest and check their sha256; read the running CONFIG_DB (and the installed frr.conf);
compute the phase's change (agent/sonic_change.py); apply it to CONFIG_DB (Redis or GCU:
compare-and-swap, read-back, restore), then deploy frr.conf (reload, read-back); if FRR fails the
leaf rolls back as a whole (the previous frr.conf reloaded, CONFIG_DB restored). Every outcome is
reported to ``POST …/targets/{leaf}/reports`` with its phase and what the agent ``covers``:
``config_db``, and ``frr`` only with ``--frr-conf`` (without it frr.conf is left alone, and the
service never counts the leaf as holding a snapshot whose frr.conf for it differs).

Report states:

* ``applied``: the phase's change is in place and read back (phase 2: ``observed_digest`` is the
  digest; phase 1 removes access only, so no snapshot is observed);
* ``refused``: the manifest (signature, fabric, files, an older sequence), a file's sha256, a
  malformed leaf file, or a patch touching a foreign key or, without ``--allow-disruptive``,
  declared keys (the paths are named); nothing changed;
* ``failed``: the service, CONFIG_DB or FRR could not be read or written; nothing changed unless
  the detail says a restore failed;
* ``rolled_back``: a read-back differed (or FRR failed after CONFIG_DB changed) and the previous
  content is back, verified; ``observed_digest`` is the snapshot last applied in phase 2, if any.

A cycle whose manifest is not the one ``sync`` desires (the service between two snapshots, or a
cache) does nothing and reports nothing (outcome ``not_desired``). A cycle with nothing to change
reports ``applied`` once for a digest and phase, and then repeats the last report as a sign of
life. A rolled-back digest and phase are not tried again by the same process (the report is
repeated): a loop would otherwise churn the switch every interval.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent.client import ServerError
from agent.config_db import Applied, ConfigDb, StoreError
from agent.cycle import CycleResult, RefusedError, Report, ReportOutbox, Throttle
from agent.frr import FrrError, FrrLeaf
from agent.manifest import Manifest, ManifestError, older_than, verify_manifest
from agent.sonic_change import LeafChange, LeafTarget, leaf_files, parse_target, phase_change
from agent.sonic_change import remaining as still_missing
from agent.sonic_state import SonicState, load_sonic_state, save_sonic_state
from agent.trust import HeldPosition, Trust, verified_keeping
from policies.errors import IsofabricError, PatchRefusedError


class SonicServer(Protocol):
    """The service's routes this agent calls (agent/client.py)."""

    def signed_manifest(self) -> dict[str, Any]:
        """The DSSE envelope of the current manifest."""

    def key_transitions(self) -> list[Any]:
        """The service's key transition statements (agent/trust.py)."""

    def sync(self) -> dict[str, Any]:
        """The fabric's sync status: ``desired``, ``phase``."""

    def artifact(self, digest: str, path: str) -> bytes:
        """One file of snapshot `digest`."""

    def post_report(self, report: dict[str, Any]) -> dict[str, Any]:
        """Store one report."""


class LeafStore(Protocol):
    """CONFIG_DB: `agent.config_db.RedisConfigDb` or `agent.gcu.GcuConfigDb`."""

    def read(self) -> ConfigDb:
        """The running CONFIG_DB."""

    def apply(
        self, running: ConfigDb, operations: Sequence[Mapping[str, Any]], intended: ConfigDb
    ) -> Applied:
        """Apply and verify, or raise `StoreError` (failed or rolled_back)."""

    def undo(self, applied: Applied, why: str) -> None:
        """Undo a verified apply; always raises `StoreError`."""

    def finish(self, applied: Applied) -> None:
        """Persist a verified apply."""


@dataclass(frozen=True)
class SonicSettings:
    """What the command line configures."""

    fabric: str
    leaf: str
    keys: Trust
    state_dir: Path
    allow_disruptive: bool = False
    # Disruptive changes on the first deployment only: while the state records no applied
    # snapshot (an empty or factory CONFIG_DB lacks, or differs in, every declared key).
    bootstrap: bool = False


class SonicAgent:
    """The cycle, with the server, CONFIG_DB, FRR (optional) and the clock injected."""

    def __init__(
        self,
        settings: SonicSettings,
        server: SonicServer,
        store: LeafStore,
        frr: FrrLeaf | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.settings, self.server, self.store, self.frr = settings, server, store, frr
        self.clock, self.say = clock, say
        self.throttle = Throttle(0.0, clock)  # the loop's interface; every cycle may apply
        self.rule = leaf_files(settings.leaf, with_frr=frr is not None)
        self.state: SonicState = load_sonic_state(settings.state_dir)
        self.outbox = ReportOutbox(server.post_report, say)
        self.held: dict[tuple[str, int], dict[str, Any]] = {}  # rolled back: (digest, phase)
        self.downloads: dict[str, bytes] = {}  # by sha256: a settled loop downloads nothing

    def cycle(self, *, coalesce: bool = False) -> CycleResult:
        """Run one cycle (`coalesce` is the loop's; this agent applies whenever it must)."""
        self.outbox.send()
        started = self.clock()
        try:
            manifest = self._verified(self.server.signed_manifest())
        except ServerError as error:
            return self._unreachable(error)
        except ManifestError as error:
            return self._finish(Report("refused", None, f"manifest refused: {error}"), started)
        older = older_than(manifest, self.state.position, "last applied")
        if older is not None:
            detail = f"manifest refused: {older}; nothing changed"
            return self._finish(Report("refused", manifest.digest, detail), started)
        return self._cycle_for(manifest, started)

    def _verified(self, envelope: dict[str, Any]) -> Manifest:
        """The manifest, verified with the active keys after following any key rotation."""
        fabric, rule = self.settings.fabric, self.rule
        return verified_keeping(
            self.settings.keys,
            self.server.key_transitions,
            lambda keys: verify_manifest(envelope, keys, fabric, rule),
            self.say,
            ((self.state.position, self.state.signer), self._keep_position),
        )

    def _keep_position(self, held: HeldPosition) -> None:
        self.state.position, self.state.signer = held
        save_sonic_state(self.settings.state_dir, self.state)

    def _cycle_for(self, manifest: Manifest, started: float) -> CycleResult:
        try:
            sync = self.server.sync()
        except ServerError as error:
            return self._unreachable(error)
        if sync.get("desired") != manifest.digest:
            why = f"sync desires {sync.get('desired')}, the manifest names {manifest.digest}"
            self.say(f"{why}: nothing done, tried again next cycle")
            return CycleResult("not_desired", f"{why}: tried again next cycle")
        phase = 1 if sync.get("phase") == 1 else 2  # null: a fabric without phases
        held = self.held.get((manifest.digest, phase))
        if held is not None:
            self.outbox.repeat(held)
            return CycleResult(str(held["state"]), f"tried before: {held['detail']}")
        report = self._attempt(manifest, phase, started)
        if report is None:
            return CycleResult("nothing", f"{manifest.digest} phase {phase} is in place")
        report.phase = phase
        if report.state == "rolled_back":
            self.held[(manifest.digest, phase)] = report.body()
        return self._finish(report, started)

    def _attempt(self, manifest: Manifest, phase: int, started: float) -> Report | None:
        """The report of this phase's apply (None: nothing to do, already reported)."""
        digest = manifest.digest
        try:
            target = parse_target(self._download(manifest))
            running = self.store.read()
            installed = self.frr.current() if self.frr is not None else ""
            change = phase_change(
                phase,
                running,
                installed,
                target,
                allow_disruptive=self._allow_disruptive(),
                first_deployment=self.state.applied_digest is None,
            )
        except RefusedError as error:
            return Report("refused", digest, str(error))
        except PatchRefusedError as error:
            return Report("refused", digest, f"{error.detail}; nothing changed")
        except (StoreError, ServerError, FrrError, IsofabricError, OSError) as error:
            return Report("failed", digest, f"{type(error).__name__}: {error}")
        durations = {"fetch": self.clock() - started}
        if self._in_place(change):
            return self._already(manifest, change)
        report = self._apply(manifest, change, running, target)
        report.durations = {**durations, **report.durations}
        return report

    def _in_place(self, change: LeafChange) -> bool:
        """No CONFIG_DB operation, and FRR runs the file the phase wants (or is left alone)."""
        if change.operations:
            return False
        if change.frr is None or self.frr is None:
            return True
        try:
            return self.frr.current() == change.frr and not self.frr.differences(change.frr)
        except FrrError:
            return False

    def _already(self, manifest: Manifest, change: LeafChange) -> Report | None:
        """Report ``applied`` once for a digest and phase found in place; then only repeat."""
        self._remember(manifest, change.phase)
        body = self.outbox.last
        if body is not None and _reports(body, manifest.digest, change.phase, "applied"):
            self.outbox.repeat(body)
            return None
        detail = f"phase {change.phase}: already in place (read back)"
        observed = manifest.digest if change.phase == 2 else None
        return Report("applied", manifest.digest, detail, observed_digest=observed)

    def _apply(
        self, manifest: Manifest, change: LeafChange, running: ConfigDb, target: LeafTarget
    ) -> Report:
        digest, mark = manifest.digest, self.clock()
        try:
            applied = self.store.apply(running, change.operations, change.intended)
        except StoreError as error:
            return self._store_outcome(digest, f"CONFIG_DB: {error}", error.state)
        durations = {"config_db": self.clock() - mark}
        mark = self.clock()
        frr_note = self._deploy_frr(change, applied, digest)
        if isinstance(frr_note, Report):
            return frr_note
        durations["frr"] = self.clock() - mark
        report = self._verify(manifest, change, target, applied)
        if report.state == "applied":
            report.detail = _applied_detail(change, frr_note)
        report.durations = durations
        return report

    def _verify(
        self, manifest: Manifest, change: LeafChange, target: LeafTarget, applied: Applied
    ) -> Report:
        """Persist CONFIG_DB (GCU), read it all back: ``applied`` when it holds the phase."""
        digest, allow = manifest.digest, self._allow_disruptive()
        try:
            self.store.finish(applied)
            left = still_missing(change, self.store.read(), target, allow_disruptive=allow)
        except StoreError as error:
            return Report("failed", digest, f"applied, then CONFIG_DB: {error}")
        if left:
            return Report("failed", digest, f"read back still lacks: {'; '.join(left[:10])}")
        self._remember(manifest, change.phase)
        observed = digest if change.phase == 2 else None
        return Report("applied", digest, "", observed_digest=observed)

    def _deploy_frr(self, change: LeafChange, applied: Applied, digest: str) -> str | Report:
        """Deploy the phase's frr.conf; a note for the report, or the leaf's rollback report."""
        if change.frr is None or self.frr is None:
            return "frr.conf left as it is"
        replaced = self.frr.current() != change.frr  # else .prev is an older generation
        try:
            deployed = self.frr.deploy(change.frr)
        except (FrrError, OSError) as error:
            return self._roll_back_leaf(applied, digest, str(error), replaced)
        delta = deployed.delta.replace("\n", " | ")
        return f"frr.conf reloaded and read back (delta: {delta or 'none'})"

    def _roll_back_leaf(self, applied: Applied, digest: str, why: str, replaced: bool) -> Report:
        """FRR failed: reload the previous frr.conf and restore CONFIG_DB (the leaf as a whole)."""
        assert self.frr is not None
        notes = [f"FRR: {why}"]
        state = "rolled_back"
        try:
            left = self.frr.revert(replaced)
            notes.append("previous frr.conf reloaded" + (f", but differs: {left}" if left else ""))
            state = "failed" if left else state
        except (FrrError, OSError) as error:
            notes.append(f"reloading the previous frr.conf failed: {error}")
            state = "failed"
        try:
            self.store.undo(applied, "the leaf rolls back as a whole")
        except StoreError as error:
            notes.append(f"CONFIG_DB: {error}")
            state = state if error.state == "rolled_back" else "failed"
        return self._store_outcome(digest, "; ".join(notes), state)

    def _store_outcome(self, digest: str, detail: str, state: str) -> Report:
        report = Report(state, digest, detail)
        if state == "rolled_back":
            report.observed_digest = self.state.applied_digest
        return report

    def _download(self, manifest: Manifest) -> dict[str, bytes]:
        """This leaf's files by base name, each with the manifest's sha256."""
        contents = {}
        for entry in manifest.files:
            data = self.downloads.get(entry.sha256)
            if data is None:
                data = self.server.artifact(manifest.digest, entry.path)
            if hashlib.sha256(data).hexdigest() != entry.sha256:
                raise RefusedError(
                    f"{entry.path}: its sha256 differs from the signed manifest's; nothing changed",
                    lasting=False,
                )
            self.downloads[entry.sha256] = data
            contents[entry.name] = data
        return contents

    def _allow_disruptive(self) -> bool:
        """--allow-disruptive, or --bootstrap while no snapshot was applied here."""
        first = self.state.applied_digest is None
        return self.settings.allow_disruptive or (self.settings.bootstrap and first)

    def _remember(self, manifest: Manifest, phase: int) -> None:
        state = self.state
        if state.position is None or manifest.position > state.position:
            state.position, state.signer = manifest.position, manifest.signer
        if phase == 2:
            state.applied_digest = manifest.digest
        save_sonic_state(self.settings.state_dir, state)

    def _unreachable(self, error: ServerError) -> CycleResult:
        what = "unreachable" if error.status is None else "answering with an error"
        self.say(f"the service is {what}, nothing done: {error}")
        return CycleResult("unreachable", str(error))

    def _finish(self, report: Report, started: float) -> CycleResult:
        # Say what this agent deploys and reads back: without --frr-conf frr.conf is left
        # alone, and the service must not count the leaf as holding a snapshot's FRR part.
        report.covers = ("config_db", "frr") if self.frr is not None else ("config_db",)
        report.durations["total"] = self.clock() - started
        self.say(f"{report.state}: {report.digest or '-'}: {report.detail}")
        self.outbox.queue(report.body())
        return CycleResult(report.state, report.detail, report)


def _applied_detail(change: LeafChange, frr_note: str) -> str:
    paths = change.paths()
    shown = ", ".join(paths[:20]) + (f" and {len(paths) - 20} more" if len(paths) > 20 else "")
    config_db = f"{len(paths)} CONFIG_DB operation(s) ({shown})" if paths else "CONFIG_DB as is"
    return f"phase {change.phase}: {config_db}; {frr_note}"


def _reports(body: Mapping[str, Any], digest: str, phase: int, state: str) -> bool:
    """True when the report `body` is `state` for `digest` in `phase`."""
    return (body.get("digest"), body.get("phase"), body.get("state")) == (digest, phase, state)
