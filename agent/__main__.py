"""``python -m agent opensm|sonic …``: the agents without the rest of the command line."""

from __future__ import annotations

from agent.command import agent_app

if __name__ == "__main__":
    agent_app(prog_name="isofabric-agent")
