"""The `isofabric` command line: serve the API, migrate, render, verify, check files.

Each command group is a module of this package; this module wires them into the root `app`
(the console script ``isofabric = "cli:app"``) in the order ``isofabric --help`` lists them.
"""

from __future__ import annotations

from cli.requirements import require_server_packages

require_server_packages()

import typer

from cli import (
    agent,
    audit_log,
    collect,
    collect_roce,
    config_audit,
    database,
    keys,
    proofs,
    render,
    rest_commands,
    serve,
    tokens,
)
from cli.errors import ReportingGroup, root_options
from cli.options import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY

__all__ = ["DEMO_ROCE_INVENTORY", "DEMO_TOPOLOGY", "app", "main"]

# ReportingGroup: a domain, database or file error of any command is one line and exit 2.
app = typer.Typer(
    help=(
        "isofabric: multi-tenant isolation for InfiniBand (P_Key partitions, OpenSM) and RoCE "
        "(VRF + VLAN + VXLAN VNI, SONiC, FRR EVPN) fabrics."
    ),
    no_args_is_help=True,
    cls=ReportingGroup,
)
app.callback()(root_options)
app.command()(serve.serve)
app.command()(render.render)
app.command()(render.verify)
app.command("check-partitions")(render.check_partitions)
app.command("audit-config")(config_audit.audit_config)
app.add_typer(database.db_app, name="db")
app.add_typer(audit_log.audit_app, name="audit")
app.add_typer(tokens.token_app, name="token")
collect.collect_app.command("roce")(collect_roce.collect_roce_command)
app.add_typer(collect.collect_app, name="collect")
app.add_typer(agent.agent_app, name="agent")
app.add_typer(keys.keys_app, name="keys")
app.add_typer(proofs.proof_app, name="proof")
rest_commands.register(app, proofs.proof_app)
# The plural nouns of the REST resources name the same groups (hidden: one command per job).
app.add_typer(tokens.token_app, name="tokens", hidden=True)
app.add_typer(proofs.proof_app, name="proofs", hidden=True)


def main() -> None:
    """Run the command line, as the `isofabric` console script does."""
    app()
