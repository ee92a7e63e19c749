"""Routes under /v1/tokens: mint (secret shown once), list and revoke API tokens."""

from __future__ import annotations

from fastapi import Response, status

from api.deps import CurrentPrincipal, Listing, Uow, authorized_router, hidden_tenant
from api.params import TokenIdPath
from policies.errors import ForbiddenError
from tenancy.schemas import Page, TokenCreate, TokenCreated, TokenView
from tenancy.schemas.tokens import TENANT_TOKEN_ROLES
from tenancy.usecases import tokens

router = authorized_router(prefix="/v1/tokens", tags=["tokens"])


@router.post("", status_code=status.HTTP_201_CREATED)
def create_token(spec: TokenCreate, uow: Uow, principal: CurrentPrincipal) -> TokenCreated:
    """Mint a token; the response is the only time its secret is shown (store it now).

    The new token is a child of the token this request is made with (`parent`): revoking that
    token revokes this one too, with every token minted from it. Before revoking an operator's
    token, reissue the tokens that must outlive it (`POST /v1/tokens/{token_id}/reissue`).
    """
    if principal.tenant is not None and spec.tenant != principal.tenant:
        raise hidden_tenant(spec.tenant or "")
    if principal.tenant is not None and spec.role not in TENANT_TOKEN_ROLES:
        # An orchestrator token may allocate free nodes to its tenant: the operator's to grant.
        raise ForbiddenError(f"role '{principal.role}' may mint tenant roles only")
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


@router.post("/{token_id}/reissue")
def reissue_token(token_id: TokenIdPath, uow: Uow) -> TokenView:
    """Make a token a child of this request's token (operators): same secret, role and scope.

    Revoking the token it was minted with then no longer revokes it: reissue the agents'
    tokens under a new operator token before revoking the old one. Its expiry is capped at its
    new parent's; 409 for a revoked or expired token, or one this request's token descends from.
    """
    return tokens.reissue_token(uow, token_id=token_id)
