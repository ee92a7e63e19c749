"""The deploy agent run on Subnet Manager hosts: ``isofabric agent opensm``.

Modules: `client` (the service's routes over HTTP), `manifest` (the signed manifest and the
pinned keys), `install` (atomic file generations), `sm` (the running OpenSM: process, signal,
log, role), `state` (what the agent remembers in the conf dir), `opensm` (one cycle and the
loop), `plan` (``--plan``). What the files mean is decided in `policies.infiniband.deploy`.
"""
