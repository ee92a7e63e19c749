"""``python -m api.agent opensm|sonic …``: a shim for ``isofabric-agent`` (agent/command.py)."""

from __future__ import annotations

from agent.command import agent_app

if __name__ == "__main__":
    agent_app(prog_name="isofabric agent")
