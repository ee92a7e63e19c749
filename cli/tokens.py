"""`isofabric token create|list|revoke|reissue`: API tokens, minted and revoked on the database.

A token is revoked with the token it was minted with; `reissue` moves a token (an agent's,
before its operator's token is revoked) under the token of the command.

With ``--url`` (or ``ISOFABRIC_URL``) the same commands go over REST (`cli.rest_counterparts`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli import rest_counterparts as rest
from cli.client import JsonOption, LimitOption, Page, TokenOption, UrlOption
from cli.options import DbOption, open_uow

token_app = typer.Typer(help="API tokens (role, tenant scope, expiry).", no_args_is_help=True)


@token_app.command("create")
def token_create(
    role: Annotated[
        str,
        typer.Option(
            "--role",
            help="operator|auditor|billing|tenant-admin|tenant-viewer|agent|orchestrator",
        ),
    ],
    name: Annotated[str, typer.Option("--name", help="A label for the token")],
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            help="The tenant (tenant roles; optional for orchestrator: it then acts for that "
            "tenant alone)",
        ),
    ] = None,
    fabric: Annotated[
        str | None, typer.Option("--fabric", help="The fabric (agent and orchestrator roles only)")
    ] = None,
    target: Annotated[
        str | None, typer.Option("--target", help="The deploy target (agent role only)")
    ] = None,
    expires_in: Annotated[
        int | None, typer.Option("--expires-in", help="Lifetime in seconds (default: none)")
    ] = None,
    db: DbOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mint an API token and print its secret (shown this once; only its hash is stored).

    An agent token names its --fabric and --target; an orchestrator token (the UFM-compatible
    API's schedulers and controllers) its --fabric, and --tenant when it acts for one tenant.

    Over REST the new token is a child of --token: revoking that one revokes it too (keep it
    with `token reissue`). On the local database it has no parent.
    """
    from datetime import UTC, datetime, timedelta

    if rest.exclusive(url, db):
        body = {"name": name, "role": role, "tenant": tenant, "fabric": fabric, "target": target}
        rest.token_create(str(url), token, body, expires_in, as_json)
        return

    from pydantic import ValidationError

    from tenancy.schemas import TokenCreate
    from tenancy.schemas.messages import in_words
    from tenancy.usecases import tokens

    expires_at = datetime.now(UTC) + timedelta(seconds=expires_in) if expires_in else None
    try:
        spec = TokenCreate.model_validate(
            {
                "name": name,
                "role": role,
                "tenant": tenant,
                "fabric": fabric,
                "target": target,
                "expires_at": expires_at,
            }
        )
    except ValidationError as error:
        # A rule over several options (a role's fabric, tenant or target) has no location.
        reasons = "; ".join(
            ": ".join(filter(None, (".".join(map(str, e["loc"])), in_words(e))))
            for e in error.errors()
        )
        typer.echo(f"error: invalid token request: {reasons}", err=True)
        raise typer.Exit(2) from error
    typer.echo(tokens.create_token(open_uow(db), spec=spec).token)


@token_app.command("list")
def token_list(
    db: DbOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
) -> None:
    """Print every token (never its secret): a table, or --json; the same locally and over REST."""
    if rest.exclusive(url, db):
        rest.token_list(str(url), token, as_json, limit)
        return
    from cli.output import listing

    listing(local_tokens(db, limit), rest.TOKEN_COLUMNS, as_json=as_json)


def local_tokens(db: str | None, limit: int | None) -> Page:
    """The database's tokens (at most `limit`), gathered as the REST client gathers pages."""
    from tenancy.usecases import tokens

    uow, gathered = open_uow(db), Page()
    while limit is None or len(gathered.data) < limit:
        wanted = 1000 if limit is None else min(1000, limit - len(gathered.data))
        page = tokens.list_tokens(uow, limit=wanted, cursor=gathered.next)
        gathered.data += [view.model_dump(mode="json") for view in page.data]
        gathered.count, gathered.next = page.count, page.next
        if page.next is None:
            break
    return gathered


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[str, typer.Argument()],
    db: DbOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Revoke a token by id."""
    from tenancy.usecases import tokens

    if rest.exclusive(url, db):
        rest.token_revoke(str(url), token, token_id)
        return

    tokens.revoke_token(open_uow(db), token_id=token_id)
    typer.echo(f"revoked {token_id}")


@token_app.command("reissue")
def token_reissue(
    token_id: Annotated[str, typer.Argument()],
    db: DbOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Re-parent a token under this command's token, so that it outlives the one it came from.

    Same secret, role and scope; on the local database it becomes a root.
    """
    if rest.exclusive(url, db):
        rest.token_reissue(str(url), token, token_id, as_json)
        return

    from tenancy.usecases import tokens

    view = tokens.reissue_token(open_uow(db), token_id=token_id)
    if as_json:
        typer.echo(view.model_dump_json(indent=2))
    else:
        typer.echo(f"reissued {token_id} under {view.parent or 'no parent (a root)'}")
