"""Routes under /v1/tokens: mint (secret shown once), list and revoke API tokens."""

from __future__ import annotations

from fastapi import Response, status

from api.deps import CurrentPrincipal, Listing, Uow, authorized_router, hidden_tenant
from api.params import TokenIdPath
from tenancy.schemas import Page, TokenCreate, TokenCreated, TokenView
from tenancy.usecases import tokens

router = authorized_router(prefix="/v1/tokens", tags=["tokens"])


@router.post("", status_code=status.HTTP_201_CREATED)
def create_token(spec: TokenCreate, uow: Uow, principal: CurrentPrincipal) -> TokenCreated:
    """Mint a token; the response is the only time its secret is shown (store it now)."""
    if principal.tenant is not None and spec.tenant != principal.tenant:
        raise hidden_tenant(spec.tenant or "")
    return tokens.create_token(uow, spec=spec)


@router.get("")
def list_tokens(uow: Uow, listing: Listing, principal: CurrentPrincipal) -> Page[TokenView]:
    """Tokens (never their secrets); a tenant admin sees its tenant's only."""
    return tokens.list_tokens(
        uow, limit=listing.limit, cursor=listing.cursor, tenant=principal.tenant
    )


@router.delete("/{token_id}", status_code=status.HTTP_204_NO_CONTENT)
def revoke_token(token_id: TokenIdPath, uow: Uow, principal: CurrentPrincipal) -> Response:
    """Revoke a token: it stops working at once; the record stays for the audit trail."""
    tokens.revoke_token(uow, token_id=token_id, tenant=principal.tenant)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
