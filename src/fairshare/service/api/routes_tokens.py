"""/api/tokens (admin): list, create (the secret is shown once), revoke."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ..storage import bounds, tokens
from ..storage.roles import require_admin
from .deps import Caller, Id, StoreDep
from .models import TokenCreate, TokenCreated, TokenOut

router = APIRouter(prefix="/api/tokens", tags=["tokens"])


@router.get("", response_model=list[TokenOut], summary="Every token, oldest first (admin)")
def list_(store: StoreDep, caller: Caller) -> list[TokenOut]:
    require_admin(caller, "listing tokens")
    with store.read() as tx:
        return [TokenOut.of(t, tx.now) for t in tokens.list_tokens(tx)]


@router.post("", response_model=TokenCreated, status_code=201, summary="Create a token (admin)")
def create(store: StoreDep, caller: Caller, body: TokenCreate) -> TokenCreated:
    require_admin(caller, "creating tokens")
    with store.write() as tx:
        expires_t = None
        if body.expires_in is not None:
            expires_t = tx.now + bounds.duration("token", "expires_in", body.expires_in, 1.0)
        rec, secret = tokens.create_token(tx, body.role, body.node, body.name, caller.describe(), expires_t)
        return TokenCreated(token=TokenOut.of(rec, tx.now), secret=secret)


@router.delete("/{token_id}", response_model=TokenOut, summary="Revoke a token (admin)")
def revoke(request: Request, store: StoreDep, caller: Caller, token_id: Id) -> TokenOut:
    require_admin(caller, "revoking tokens")
    with store.write() as tx:
        out = TokenOut.of(tokens.revoke_token(tx, token_id, caller.describe()), tx.now)
    cache = getattr(request.app.state, "auth_cache", None)
    if cache is not None:
        cache.clear()
    return out
