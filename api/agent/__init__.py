"""A shim kept for existing deployments: ``python -m api.agent …`` runs the agents of `agent/`.

New installations run ``isofabric-agent opensm|sonic`` (the agent distribution's own script);
``isofabric agent …`` is the same command inside the full command line.
"""
