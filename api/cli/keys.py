"""`isofabric keys create|rotate|list`: the service's Ed25519 signing keys."""

from __future__ import annotations

import json

import typer

from api.cli.options import DbOption, open_uow

keys_app = typer.Typer(help="The service's Ed25519 signing keys.", no_args_is_help=True)


@keys_app.command("create")
def keys_create(db: DbOption = None) -> None:
    """Create the active signing key unless one exists; print its public form."""
    from tenancy import signing_keys

    typer.echo(json.dumps(signing_keys.create(open_uow(db)).model_dump(mode="json"), indent=2))


@keys_app.command("rotate")
def keys_rotate(db: DbOption = None) -> None:
    """Make a new active key; the previous one is retired and stays published."""
    from tenancy import signing_keys

    typer.echo(json.dumps(signing_keys.rotate(open_uow(db)).model_dump(mode="json"), indent=2))


@keys_app.command("list")
def keys_list(db: DbOption = None) -> None:
    """Print every public key (keyid, PEM, JWK, status) as JSON."""
    from tenancy import signing_keys

    keys = signing_keys.list_keys(open_uow(db))
    typer.echo(json.dumps(keys.model_dump(mode="json"), indent=2))
