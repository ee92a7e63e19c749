"""`isofabric serve` runs the REST API (and creates a missing database)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from api.request_log import LogFormat, configure_logging
from cli.errors import detail_of, reported
from cli.options import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY, DbOption, open_uow, settings_for

if TYPE_CHECKING:
    from tenancy.store.settings import Settings
    from tenancy.store.uow import UnitOfWork


def serve(
    host: Annotated[str, typer.Option(help="Address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    db: DbOption = None,
    demo: Annotated[
        bool,
        typer.Option(
            help="Load the demo fabric and tenants (and, on a first run, create the keys as "
            "`keys create` does)"
        ),
    ] = False,
    log_format: Annotated[
        LogFormat,
        typer.Option(
            help="Log lines as text or one JSON object each", envvar="ISOFABRIC_LOG_FORMAT"
        ),
    ] = LogFormat.TEXT,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated addresses or networks (or '*') of TLS-terminating proxies "
            "whose X-Forwarded-Proto gives the client's scheme (the console's cookies are "
            "then Secure); the client address stays the TCP peer",
            envvar="ISOFABRIC_FORWARDED_ALLOW_IPS",
        ),
    ] = None,
) -> None:
    """Run the REST API (migrations are applied on start, or once the database answers)."""
    import uvicorn

    from api.app import create_app
    from api.health import database_state

    uvicorn_logging = configure_logging(log_format)  # before anything logs (api/request_log.py)
    if demo:
        create_demo_keys(db)
    settings = settings_for(db)
    if forwarded_allow_ips is not None:
        settings = _with_proxies(settings, forwarded_allow_ips)
    application = create_app(settings)
    uow = application.state.uow
    try:
        database = database_state(application)
        if not database.prepared:
            # It keeps serving (/healthz 200, /readyz and /v1 503) and retries (api/health.py).
            typer.echo(f"warning: the database does not answer yet: {database.error}", err=True)
        elif _open_mode(host, settings.admin_token, uow):
            typer.echo(open_mode_warning(host), err=True)
        if demo and database.prepared:
            _load_demo(uow)
        typer.echo(
            f"isofabric API on http://{host}:{port}/v1  (interactive docs: "
            f"http://{host}:{port}/docs; console: http://{host}:{port}/ui)"
        )
        # proxy_headers=False: the ASGI client address stays the TCP peer, which open mode's
        # loopback check trusts; uvicorn would otherwise take it from X-Forwarded-For.
        uvicorn.run(application, host=host, port=port, log_level="info", proxy_headers=False,
                    **uvicorn_logging)  # fmt: skip
    finally:
        # Stopped, or failed before serving: close the connections, so SQLite folds the
        # write-ahead log into the database and removes the -wal and -shm files.
        uow.engine.dispose()


def _with_proxies(settings: Settings, text: str) -> Settings:
    """`settings` trusting the proxies `text` lists (ISOFABRIC_FORWARDED_ALLOW_IPS's format)."""
    import dataclasses

    from tenancy.store.settings import forwarded_allow_ips

    try:
        return dataclasses.replace(settings, forwarded_allow_ips=forwarded_allow_ips(text))
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--forwarded-allow-ips") from error


def _open_mode(host: str, admin_token: str | None, uow: UnitOfWork) -> bool:
    """Whether `serve` listens beyond this host while no token closes the API."""
    from api.auth import is_loopback
    from tenancy.usecases import tokens

    return not is_loopback(host) and admin_token is None and not tokens.tokens_exist(uow)


def _load_demo(uow: UnitOfWork) -> None:
    """Load the demo fabrics and tenants unless the database already has them."""
    from tenancy.usecases.demo import load_demo

    topology, inventory = DEMO_TOPOLOGY.read_text(), DEMO_ROCE_INVENTORY.read_text()
    if load_demo(uow, topology_text=topology, roce_inventory_text=inventory):
        typer.echo(
            "loaded demo data: fabrics ib-east (InfiniBand) and roce-west (RoCE), "
            "tenants acme, research, globex"
        )


def create_demo_keys(db: str | None) -> None:
    """On the demo's first run, create the keys `isofabric keys create` would (in-process).

    A demo is one server on one host (`make run`), so the replicas' race that keeps `serve` from
    ever making a key does not exist; one process instead of two halves the first start's
    imports. What keeps it from making them (a database that does not answer yet, a key that
    is another one) is a warning: `serve` runs on and `/readyz` says what is missing.
    """
    from tenancy.usecases import signing_keys

    try:
        uow = open_uow(db, create=True)
        if signing_keys.readiness(uow):
            typer.echo(f"demo keys: {signing_keys.create(uow).summary()}")
        uow.engine.dispose()  # the server opens its own
    except reported() as error:  # a database not answering yet, a key file elsewhere, ...
        typer.echo(f"warning: no demo keys yet: {detail_of(error)}", err=True)


def open_mode_warning(host: str) -> str:
    """What `serve` says when it listens beyond this host while no token closes the API."""
    from api.auth import BOOTSTRAP_HINT

    return (
        f"warning: --host {host} is not a loopback address and no token is configured "
        "(ISOFABRIC_ADMIN_TOKEN is unset and no API token exists). The API is in open mode: it "
        "answers only clients on this host, and every other client gets 401 until you "
        f"{BOOTSTRAP_HINT}. Behind a reverse proxy on this host every client looks local: "
        "create a token before exposing it."
    )
