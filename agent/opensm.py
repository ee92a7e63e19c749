"""One cycle of the OpenSM deploy agent; agent/loop.py repeats it.

A cycle: fetch the signed manifest and verify it with the pinned keys (a position older than
the installed manifest's is refused); nothing to do when every installed file has the manifest's
sha256 and that deployment settled with the running OpenSM (one settled as a standby is not
settled once this OpenSM is master); otherwise (in a loop at most once per ``--min-interval``,
so changes in between coalesce) download and check the files (agent/prepare.py), check that
OpenSM reads the conf dir, install atomically (agent/install.py), then on the master SIGHUP
OpenSM, wait for the sweep and compare the P_Key tables read back with the model parsed from the
signed partitions.conf, rolling back on a problem (agent/master.py). A standby only
installs. Every outcome is reported; a report the server did not take is sent again on the next
cycle.

Report states:

* ``applied``: on the master, the read-back matched the signed model; on a standby, the files
  are installed, parsed and equal to the manifest;
* ``refused``: the manifest's signature, fabric or type, a position older than the installed
  manifest's (a replay or a stale server), a file's sha256, or a critical finding in
  partitions.conf; nothing installed;
* ``failed``: OpenSM not running, not reading the files in the conf dir, no sweep, a tool
  failing, a download failing; never claims the files are enforced;
* ``rolled_back``: the read-back or the log showed a problem; the previous files are back;
* ``restart_required``: installed (on the master also swept and verified), but an option only a
  restart applies differs from what the running OpenSM was started with.

The same agent process does not try again a refused signed manifest (held by the envelope's
hash: the same envelope would be refused again), except a download whose sha256 differed (the
transport's fault, tried again next cycle), nor a rolled-back snapshot with the same files (held
by digest and file hashes: a loop would otherwise SIGHUP OpenSM every ``--min-interval``). A new
envelope (the service re-signs a snapshot with another opensm.conf when the M_Key changes), new
files, or a new process try again. A held outcome, like a settled one, is reported again every
cycle: the service takes the repeat as a sign of life (``last_seen_at``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from agent.client import ServerError
from agent.cycle import (
    AgentSettings,
    CycleResult,
    Deployment,
    FailedError,
    RefusedError,
    Report,
    ReportOutbox,
    Server,
    SmHost,
    Throttle,
)
from agent.install import install_file, pause_point, sha256_of
from agent.manifest import (
    OPTIONS,
    Manifest,
    ManifestError,
    envelope_hash,
    files_hash,
    older_than,
    verify_manifest,
)
from agent.master import Master, Verification
from agent.prepare import check_opensm, identity, observe, prepare
from agent.sm import SmError, SmProcess
from agent.state import AgentState, Pending, Settled, load_state, save_state
from agent.trust import HeldPosition, verified_keeping
from policies.infiniband.opensm_conf import management_keys


class Agent:
    """The cycle, with the server, the SM host, the clock and the sampling injected."""

    def __init__(
        self,
        settings: AgentSettings,
        server: Server,
        host: SmHost,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.settings, self.server, self.host, self.clock, self.say = (
            settings, server, host, clock, say,
        )  # fmt: skip
        self.master = Master(settings, host, clock, rng or random.Random())
        self.throttle = Throttle(settings.min_interval, clock)
        self.outbox = ReportOutbox(server.post_report, say)
        # The report of a held outcome, by envelope hash (refused) or files hash (rolled back).
        self.held: dict[str, dict[str, Any]] = {}
        self.hold_as: str | None = None  # the key this cycle's report is to be held under
        self.state: AgentState = load_state(settings.conf_dir)
        self.sm_problem = ""  # why there is no running OpenSM, as last seen
        self.role_seen: str | None = None  # this cycle's answer of sminfo, once asked

    def cycle(self, *, coalesce: bool = False) -> CycleResult:
        """Run one cycle; with `coalesce`, apply only once `min_interval` has passed."""
        self.outbox.send()
        self.hold_as, self.role_seen = None, None
        started = self.clock()
        try:
            envelope = self.server.signed_manifest()
        except ServerError as error:
            what = "unreachable" if error.status is None else "answering with an error"
            self.say(f"the service is {what}, nothing done: {error}")
            return CycleResult("unreachable", str(error))
        envelope_id = envelope_hash(envelope)
        if envelope_id in self.held:
            return self._repeat_held(envelope_id, "this manifest was refused before")
        try:
            manifest = self._verified(envelope)
        except ManifestError as error:
            # Not held while the service's key transitions could not be read: the successor
            # of a rotated key is learned at a later cycle, from the same envelope.
            self.hold_as = envelope_id if self.settings.keys.checked else None
            return self._finish(Report("refused", None, f"manifest refused: {error}"), started)
        older = older_than(manifest, self.state.installed_position, "installed")
        if older is not None:
            self.hold_as = envelope_id
            detail = f"manifest refused: {older}; nothing installed"
            return self._finish(Report("refused", manifest.digest, detail), started)
        pause_point("fetched")
        return self._cycle_for(manifest, envelope_id, started, coalesce)

    def _cycle_for(
        self, manifest: Manifest, envelope_id: str, started: float, coalesce: bool
    ) -> CycleResult:
        files_id = files_hash(manifest)
        if files_id in self.held:
            return self._repeat_held(files_id, f"{manifest.digest} with these files was tried")
        process = self._process()
        if self._settled(manifest, process):
            self._settled_for(manifest)
            self._heartbeat(manifest.digest)
            return CycleResult("nothing", f"{manifest.digest} is installed and settled")
        if coalesce and self.throttle.remaining() > 0:
            return CycleResult("waiting", f"next apply in {self.throttle.remaining():.1f} s")
        self.throttle.mark()
        durations = {"fetch": self.clock() - started}
        try:
            report = self._apply(manifest, process)
        except RefusedError as error:
            if error.lasting:
                self.hold_as = envelope_id
            report = Report("refused", manifest.digest, str(error))
        except FailedError as error:
            report = Report("failed", manifest.digest, str(error))
        except (OSError, SmError) as error:  # e.g. the conf dir is not writable
            report = Report("failed", manifest.digest, f"{type(error).__name__}: {error}")
        report.durations = {**durations, **report.durations}
        return self._finish(report, started)

    def _process(self) -> SmProcess | None:
        """The running OpenSM (None when none), its start options recorded when first seen."""
        try:
            process: SmProcess | None = self.host.process()
            self.sm_problem = ""
        except SmError as error:
            process, self.sm_problem = None, str(error)
        if observe(process, self.state):
            save_state(self.settings.conf_dir, self.state)
        return process

    def _settled(self, manifest: Manifest, process: SmProcess | None) -> bool:
        """Installed files equal the manifest, and that deployment settled with this OpenSM.

        A deployment settled as a standby is not settled once this OpenSM is master: the new
        master's tables were never read back (nor swept with certainty). The role is asked (an
        sminfo call) only then.
        """
        conf_dir, settled = self.settings.conf_dir, self.state.settled
        if not all(sha256_of(conf_dir / f.name) == f.sha256 for f in manifest.files):
            return False
        files = {f.name: f.sha256 for f in manifest.files}
        if settled is None or settled.files != files:
            return False
        if identity(process) != (settled.pid, settled.start_ticks):
            return False
        return settled.role == "master" or self._role() != "master"

    def _finish(self, report: Report, started: float) -> CycleResult:
        report.durations["total"] = self.clock() - started
        self.say(f"{report.state}: {report.digest or '-'}: {report.detail}")
        body = report.body()
        if self.hold_as is not None:
            self.held[self.hold_as] = body
        self.outbox.queue(body)
        return CycleResult(report.state, report.detail, report)

    def _repeat_held(self, key: str, why: str) -> CycleResult:
        """A held outcome: report it again, so a live agent does not look dead; do nothing."""
        body = self.held[key]
        self.outbox.repeat(body)
        return CycleResult(str(body["state"]), f"{why}: {body['detail']}")

    def _heartbeat(self, digest: str) -> None:
        """Report the settled state again: the server then only moves the target's last-seen time.

        Without it an idle, healthy agent and a dead one look the same to the service. A new
        process that finds its deployment settled reports it once with the role it reads now.
        """
        body = self.outbox.last
        settled = self.state.settled
        if settled is None:
            return
        if body is None or body.get("digest") != digest or body.get("state") != settled.state:
            if settled.digest != digest:
                return
            detail = "up to date: the installed files equal the signed manifest"
            role = self._role()
            # A master's settled deployment was read back (`_sweep_and_verify`); a standby's not.
            observed = digest if settled.role == "master" else None
            body = Report(settled.state, digest, detail, role, observed).body()
        self.outbox.repeat(body)

    def _role(self) -> str:
        """This OpenSM's role (asked once a cycle), with the M_Key of the installed opensm.conf."""
        if self.role_seen is None:
            options = self.settings.conf_dir / "opensm.conf"
            try:
                m_key, _ = management_keys(options.read_text())
                self.role_seen = self.host.role(m_key)[0]
            except (OSError, SmError):
                self.role_seen = "unknown"
        return self.role_seen

    # ---------------------------------------------------------------------------- one apply

    def _apply(self, manifest: Manifest, process: SmProcess | None) -> Report:
        conf_dir = self.settings.conf_dir
        deployment = prepare(manifest, self.server, conf_dir, self.state.pending, self.clock)
        if process is not None and self.state.started_with is not None:
            check_opensm(deployment, process, self.state.started_with, conf_dir)
        mark = self.clock()
        self._install(deployment)
        deployment.durations["install"] = self.clock() - mark
        pause_point("installed")
        report = self._enforce(deployment)
        report.durations = {**deployment.durations, **report.durations}
        return report

    def _install(self, deployment: Deployment) -> None:
        """Record the deployment as pending (it names its ``.prev`` files), then install.

        The previous digest is the snapshot whose files ``.prev`` receives: the one installed
        now (not the last applied one). A resumed install (a crash, or OpenSM down) keeps what
        its first attempt recorded: some of its files may be in place already.
        """
        state, conf_dir = self.state, self.settings.conf_dir
        pending = state.pending
        if pending is not None and pending.digest == deployment.digest:
            files, previous = sorted({*pending.files, *deployment.changed}), pending.previous_digest
        else:
            files, previous = list(deployment.changed), self._installed_now()
        state.pending = Pending(deployment.digest, files, previous)
        state.installed_digest, state.installed_files = None, None  # mixed until all are in place
        save_state(conf_dir, state)
        for name in deployment.changed:
            install_file(conf_dir / name, deployment.contents[name])
        state.installed_digest = deployment.digest
        state.installed_files = {f.name: f.sha256 for f in deployment.manifest.files}
        save_state(conf_dir, state)
        self._installed_sequence(deployment.manifest)

    def _installed_now(self) -> str | None:
        """The snapshot whose files are installed, if known and they still have its hashes."""
        files = self.state.installed_files
        if files is None or any(
            sha256_of(self.settings.conf_dir / name) != sha for name, sha in files.items()
        ):
            return None
        return self.state.installed_digest

    def _installed_sequence(self, manifest: Manifest) -> None:
        """Remember `manifest`'s position, its files being installed: older ones are refused."""
        known = self.state.installed_position
        if known is None or manifest.position > known:
            self.state.installed_position = manifest.position
            self.state.installed_signer = manifest.signer
            save_state(self.settings.conf_dir, self.state)

    def _verified(self, envelope: dict[str, Any]) -> Manifest:
        """The manifest, verified with the active keys after following any key rotation."""
        fabric = self.settings.fabric
        return verified_keeping(
            self.settings.keys,
            self.server.key_transitions,
            lambda keys: verify_manifest(envelope, keys, fabric),
            self.say,
            ((self.state.installed_position, self.state.installed_signer), self._keep_position),
        )

    def _keep_position(self, held: HeldPosition) -> None:
        self.state.installed_position, self.state.installed_signer = held
        save_state(self.settings.conf_dir, self.state)

    def _settled_for(self, manifest: Manifest) -> None:
        """The settled files are `manifest`'s: it is settled too, if it names another snapshot.

        A change the OpenSM files do not show (a cable moved, a node renamed) makes a new
        snapshot with the same files: what was read back for the old digest holds for the new.
        """
        state = self.state
        assert state.settled is not None
        if state.settled.digest != manifest.digest:
            state.settled.digest = manifest.digest
            state.installed_digest = manifest.digest
            state.installed_files = dict(state.settled.files)
            save_state(self.settings.conf_dir, state)
        self._installed_sequence(manifest)

    def _enforce(self, deployment: Deployment) -> Report:
        if deployment.process is None:
            return Report(
                "failed",
                deployment.digest,
                f"{self.sm_problem or 'OpenSM is not running'}: the verified files are "
                f"installed in {self.settings.conf_dir} but nothing enforces them",
            )
        role, self_guid = self.host.role(deployment.m_key)
        if role == "standby":
            return self._settle(deployment, self._standby(deployment))
        if role != "master":
            return Report(
                "failed",
                deployment.digest,
                "cannot tell master from standby (sminfo -D 0 answered no SMInfo); the files "
                "are installed and the sweep is tried again next cycle",
            )
        return self._sweep_and_verify(deployment, self_guid)

    def _standby(self, deployment: Deployment) -> Report:
        """A standby installs only; a new opensm.conf is also reloaded (SIGHUP), never swept.

        OpenSM re-reads its options on SIGHUP (osm_subn_rescan_conf_files()) and a standby does
        not sweep (do_sweep() in osm_state_mgr.c returns unless master). Without it a standby
        keeps the old SM_Key after the keys change: master and standby log ERR 2F18
        ("non-matching sm_key") on every poll, and the standby may take the subnet over.
        """
        detail = "standby: installed, parsed and equal to the signed manifest (no sweep)"
        if OPTIONS in deployment.changed:
            assert deployment.process is not None
            self.host.hup(deployment.process)
            detail += "; opensm.conf changed: SIGHUP reloaded its options"
        return Report(self._state(deployment), "", detail, "standby")

    def _sweep_and_verify(self, deployment: Deployment, self_guid: int | None) -> Report:
        try:
            found = self.master.verify(deployment, self_guid)
        except SmError as error:
            return Report("failed", deployment.digest, f"after installing: {error}", "master")
        if found.problem:
            return self._roll_back(deployment, found, self_guid)
        detail = f"swept; the P_Key tables of {len(found.ports)} port(s) match the signed model"
        report = Report(self._state(deployment), "", detail, "master", deployment.digest)
        report.ports_read = len(found.ports)
        return self._settle(deployment, report)

    def _roll_back(
        self, deployment: Deployment, found: Verification, self_guid: int | None
    ) -> Report:
        pending = self.state.pending
        same = pending is not None and pending.digest == deployment.digest
        files = pending.files if pending is not None and same else []
        previous = pending.previous_digest if pending is not None and same else None
        self.hold_as = files_hash(deployment.manifest)  # also a failed one: not tried again
        report = self.master.roll_back(deployment, found, files, previous, self_guid)
        if report.state == "rolled_back":  # the files of `previous` (None: unknown) are back
            conf_dir = self.settings.conf_dir
            hashes = {f.name: sha256_of(conf_dir / f.name) for f in deployment.manifest.files}
            self.state.installed_digest = previous
            self.state.installed_files = None
            if previous is not None:
                self.state.installed_files = {n: h for n, h in hashes.items() if h is not None}
            self.state.pending = None
            save_state(conf_dir, self.state)
        return report

    def _state(self, deployment: Deployment) -> str:
        return "restart_required" if deployment.restart else "applied"

    def _settle(self, deployment: Deployment, report: Report) -> Report:
        """Remember the finished deployment; the report gets its digest and full detail."""
        manifest = deployment.manifest
        files = {f.name: f.sha256 for f in manifest.files}
        pid, ticks = identity(deployment.process)
        self.state.settled = Settled(manifest.digest, files, pid, ticks, report.state, report.role)
        self.state.pending = None
        save_state(self.settings.conf_dir, self.state)
        report.digest = manifest.digest
        parts = [report.detail]
        if deployment.restart:
            changes = "; ".join(str(change) for change in deployment.restart)
            parts.append(f"restart OpenSM to apply what SIGHUP does not reload: {changes}")
        report.detail = ". ".join(parts + deployment.notes)
        return report
