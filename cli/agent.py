"""`isofabric agent`: deploy agents run on fabric hosts (defined in agent/command.py)."""

from __future__ import annotations

from agent.command import agent_app

__all__ = ["agent_app"]
