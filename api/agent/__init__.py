"""The deploy agent run on Subnet Manager hosts: ``isofabric agent opensm``.

Modules: `command` (the command line; ``python -m api.agent``), `opensm` (one cycle), `loop`
(cycles every ``--interval``), `cycle` (settings, reports, the throttle), `manifest` (the signed
manifest and the pinned keys), `client` (the service's routes over HTTP), `prepare` (download
and check the files, check the running OpenSM), `install` (atomic file generations), `master`
(SIGHUP, read-back, rollback), `sm` (the running OpenSM: process, signal, log, role), `state`
(what the agent remembers in the conf dir), `plan` (``--plan``). What the files mean is decided in
`policies.infiniband.deploy` and `policies.infiniband.opensm_conf`.
"""
