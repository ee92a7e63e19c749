"""`isofabric keys create|rotate|list|transitions`: signing keys, keyring and OpenSM secret.

The private key and the OpenSM secret live in files of mode 0600 beside the database (or where
``ISOFABRIC_SIGNING_KEY_FILE`` / ``ISOFABRIC_OPENSM_SECRET_FILE`` say), the public keys in the
keyring file verifiers trust; the database records public keys only.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.options import DbOption, open_uow

keys_app = typer.Typer(help="The service's Ed25519 signing keys.", no_args_is_help=True)


@keys_app.command("create")
def keys_create(
    db: DbOption = None,
    trust_retired: Annotated[
        bool,
        typer.Option(
            "--trust-retired",
            help="Also add the database's retired public keys to the keyring (after upgrading "
            "from a version that kept keys in the database; check them against what /v1/keys "
            "published)",
        ),
    ] = False,
) -> None:
    """Create the signing key file, keyring and OpenSM secret unless they exist; print the key.

    Run it once per deployment, before the first `serve` (`make run` does); running it again
    changes nothing. Copy the key file and the OpenSM secret to every replica and back them up.
    """
    from tenancy.usecases import signing_keys

    # Besides serve, db upgrade and db restore, the one command that may create the database:
    # it is the first one a deployment runs (`make run` does).
    setup = signing_keys.create(open_uow(db, create=True), trust_retired=trust_retired)
    typer.echo(json.dumps(setup.document(), indent=2))
    typer.echo(setup.summary(), err=True)


@keys_app.command("rotate")
def keys_rotate(db: DbOption = None) -> None:
    """Make a new active key (key file replaced, keyring appended); the old one is retired."""
    from tenancy.usecases import signing_keys

    view = signing_keys.rotate(open_uow(db))
    typer.echo(json.dumps(view.model_dump(mode="json"), indent=2))


@keys_app.command("list")
def keys_list(db: DbOption = None) -> None:
    """Print every recorded public key (keyid, PEM, JWK, status) as JSON."""
    from tenancy.usecases import signing_keys

    keys = signing_keys.list_keys(open_uow(db))
    typer.echo(json.dumps(keys.model_dump(mode="json"), indent=2))


@keys_app.command("transitions")
def keys_transitions(db: DbOption = None) -> None:
    """Print every key transition statement (what agents follow a rotation by) as JSON."""
    from tenancy.usecases import key_retirement

    transitions = key_retirement.transitions(open_uow(db))
    typer.echo(json.dumps(transitions.model_dump(mode="json", by_alias=True), indent=2))
