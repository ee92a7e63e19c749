"""`isofabric serve` runs the REST API; `isofabric db upgrade` migrates the database."""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli.options import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY, DbOption, open_uow, settings_for

db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)


def serve(
    host: Annotated[str, typer.Option(help="Address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    db: DbOption = None,
    demo: Annotated[bool, typer.Option(help="Load the demo fabric and tenants")] = False,
) -> None:
    """Run the REST API (migrations are applied on start)."""
    import uvicorn

    from api.app import create_app
    from tenancy.demo import load_demo

    settings = settings_for(db)
    application = create_app(settings)
    uow = application.state.uow
    if demo and load_demo(
        uow,
        topology_text=DEMO_TOPOLOGY.read_text(),
        roce_inventory_text=DEMO_ROCE_INVENTORY.read_text(),
    ):
        typer.echo(
            "loaded demo data: fabrics ib-east (InfiniBand) and roce-west (RoCE), "
            "tenants acme, research, globex"
        )
    typer.echo(
        f"isofabric API on http://{host}:{port}/v1  (interactive docs: http://{host}:{port}/docs)"
    )
    uvicorn.run(application, host=host, port=port, log_level="info")


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None) -> None:
    """Apply every migration and seed the QoS classes."""
    open_uow(db)
    typer.echo("database is at the latest schema")
