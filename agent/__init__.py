"""The deploy agents: ``isofabric-agent opensm`` (SM hosts) and ``isofabric-agent sonic`` (leaves).

Modules: `command` (the command line, ``isofabric-agent``), `opensm` (one cycle), `loop`
(cycles every ``--interval``), `cycle` (settings, reports, the throttle), `manifest` (the signed
manifest and the pinned keys), `client` (the service's routes over HTTP), `prepare` (download
and check the files, check the running OpenSM), `install` (atomic file generations), `master`
(SIGHUP, read-back, rollback), `sm` (the running OpenSM: process, signal, log, role), `state`
(what the agent remembers in the conf dir), `plan` (``--plan``). What the files mean is decided in
`policies.infiniband.deploy` and `policies.infiniband.opensm_conf`.

The SONiC leaf agent: `sonic` (one cycle), `sonic_change` (the leaf's files and the change of a
rollout phase, decided in `policies.roce.patch` and `policies.roce.frr_running`), `config_db`
(CONFIG_DB in Redis), `gcu` (CONFIG_DB through ``config apply-patch``), `frr` (frr-reload.py and
vtysh), `sonic_state` (what it remembers in ``--state-dir``).
"""

__all__ = [
    "client",
    "command",
    "config_db",
    "cycle",
    "frr",
    "gcu",
    "ibdiag",
    "install",
    "loop",
    "manifest",
    "master",
    "opensm",
    "plan",
    "prepare",
    "sm",
    "sonic",
    "sonic_change",
    "sonic_state",
    "state",
]
