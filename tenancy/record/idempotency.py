"""Idempotency-Key records: a retried POST gets its first response and changes nothing more.

A keyed request is named by (principal, method, path, key), its `KeyedRequest`:

- principal: the token's id (``token:<id>``; ``admin-token``; ``anonymous`` in open mode), so
  another token using the same key makes another request;
- path: the concrete request path, not the route template. Path parameters are part of what
  is asked: an allocation body sent to /v1/tenants/acme/... and to /v1/tenants/globex/... with
  the same key are two requests, and a template would replay acme's allocation to globex;
- the request's fingerprint (`fingerprint`: media type, query, canonical JSON body) is kept
  beside the name: the same key with another fingerprint is refused (422), never replayed.

The reservation commits with the change. The unit of work of a keyed request carries its
reservation, and the first write transaction the request opens inserts it as a pending record (no
status) before anything else (`reserve_key`, the unit of work's `first_write`): the change and its
reservation commit or roll back as one, so no crash leaves a change without its reservation. A
concurrent request with the same name inserts the same reservation and meets the unique constraint:
it waits for the first one's transaction (PostgreSQL: the index entry; SQLite: BEGIN IMMEDIATE) and
then fails with `IdempotencyInProgressError` (409) having changed nothing; retried, it gets the
replay. The api layer (api/idempotency.py) looks the name up before running a request, and completes
the record with the response (`complete`) before sending it, so a client holding a response finds it
kept.

What is recorded (`complete`):

- a response to a request whose reservation committed, unless it is a 5xx: the request's transaction
  committed, so its answer is final (a 4xx there comes after a read, e.g. a config audit that
  does not parse) and is replayed like a 2xx;
- a 2xx response to a request that committed no reservation (it opened no write transaction);
- never a refusal that rolled back (4xx): it changed nothing, so a retry simply runs again and
  may pass (a 409 "retry it" after a concurrent writer, a 404 for a tenant onboarded meanwhile).
  Stripe replays those; pinning a transient refusal for a day would help no client;
- never a 5xx: if its reservation committed, the change may have happened, so the record stays
  pending and retries get 409 until it expires, rather than a second change;
- never a secret (the api layer drops it and sets `secret_withheld`), never a dry run (the api
  layer gives dry runs no reservation).

Records expire after ``Settings.idempotency_ttl_hours`` (at least 24): an expired record is
ignored, replaced by a new reservation of its name, and purged whenever another record is completed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import rfc8785
from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlmodel import Session, col, select

from policies.errors import ConflictError, IdempotencyInProgressError, IdempotencyKeyReusedError
from tenancy import models as m
from tenancy.store.settings import Settings

if TYPE_CHECKING:
    from tenancy.store.uow import Tx, UnitOfWork

log = logging.getLogger("isofabric")


@dataclass(slots=True)
class KeyedRequest:
    """A keyed request: its name, its fingerprint, and whether its reservation has committed."""

    principal: str
    method: str
    path: str
    key: str
    fingerprint: str
    committed: bool = False  # set when the reserving transaction commits

    # The reservation is the unit of work's `first_write` (tenancy/store/uow.py) of a keyed request.
    @property
    def done(self) -> bool:
        """True once the reservation has committed: later transactions reserve nothing."""
        return self.committed

    def write(self, tx: Tx) -> None:
        """Insert the reservation in the request's first write transaction (`reserve_key`)."""
        reserve_key(tx, self)

    def commit(self) -> None:
        """The reserving transaction committed."""
        self.committed = True


@dataclass(frozen=True, slots=True)
class Outcome:
    """A response as recorded: status, body and the headers worth replaying.

    `secret_withheld`: the body had a secret, dropped before recording; it is never replayed.
    """

    status: int
    body: bytes
    headers: dict[str, str]
    secret_withheld: bool = False


def fingerprint(media_type: str, query: Sequence[tuple[str, str]], body: bytes) -> str:
    """The SHA-256 (hex) naming what a request asks: media type, query pairs and body.

    A JSON body counts by its RFC 8785 canonical form, so member order and spacing do not make
    another request; any other body (or JSON that does not canonicalise) counts byte for byte.
    """
    parts = [media_type, sorted(query), hashlib.sha256(_canonical(media_type, body)).hexdigest()]
    return hashlib.sha256(rfc8785.dumps(parts)).hexdigest()


def _canonical(media_type: str, body: bytes) -> bytes:
    if media_type != "application/json" and not media_type.endswith("+json"):
        return body
    try:
        return rfc8785.dumps(json.loads(body))
    except (ValueError, RecursionError, rfc8785.CanonicalizationError):
        return body  # not JSON the service would accept either: the bytes are the request


def find(uow: UnitOfWork, keyed: KeyedRequest) -> Outcome | None:
    """The recorded response to `keyed`'s name, or None when there is none (or it expired).

    Raises:
        IdempotencyKeyReusedError: the key named a request with another fingerprint.
        IdempotencyInProgressError: the request that reserved the key has no response yet.
    """
    with uow.transaction(read_only=True) as tx:
        row = _live_row(tx.session, keyed, tx.now - ttl(tx.settings))
    if row is None:
        return None
    if row.fingerprint != keyed.fingerprint:
        raise IdempotencyKeyReusedError(
            f"Idempotency-Key '{keyed.key}' was used for another request to {keyed.method} "
            f"{keyed.path} (another body or query); use a new key for a new request"
        )
    if row.status is None:
        raise in_progress(keyed)
    return Outcome(
        row.status, row.body or b"", json.loads(row.headers or "{}"), row.secret_withheld
    )


def in_progress(keyed: KeyedRequest) -> IdempotencyInProgressError:
    """The error for a key reserved by a request that has no recorded response."""
    return IdempotencyInProgressError(
        f"a request with Idempotency-Key '{keyed.key}' is in progress (or failed after it "
        "committed): nothing was done; retry later to get its response"
    )


def reserve_key(tx: Tx, keyed: KeyedRequest) -> None:
    """Insert `keyed` as a pending record in `tx`, the first write transaction of its request.

    An expired record of the same name is deleted first.

    Raises:
        IdempotencyInProgressError: another request holds the name (the unique constraint).
    """
    cutoff = tx.now - ttl(tx.settings)
    tx.session.execute(
        delete(m.IdempotencyRecord).where(
            *_named(keyed), col(m.IdempotencyRecord.created_at) < cutoff
        )
    )
    tx.session.add(_record(keyed, tx))
    try:
        tx.session.flush()
    except IntegrityError as error:
        raise in_progress(keyed) from error


def complete(uow: UnitOfWork, keyed: KeyedRequest, outcome: Outcome) -> None:
    """Record `outcome` for `keyed` where the module's rules say so; then purge expired ones."""
    if not _recordable(keyed, outcome.status):
        return
    uow = replace(uow, first_write=None)  # this transaction reserves nothing
    try:
        with uow.transaction() as tx:
            row = _live_row(tx.session, keyed, tx.now - ttl(tx.settings))
            if row is None:
                row = _record(keyed, tx)
            elif row.status is not None or not keyed.committed:
                return  # another request's record (it reserved the name meanwhile)
            _fill(row, outcome)
            tx.session.add(row)
    except ConflictError:
        return  # a concurrent request recorded the name first: its record stands
    purge_expired(uow)


def purge_expired(uow: UnitOfWork) -> None:
    """Delete the expired records; a failure (two purges deadlocked) only defers it.

    Its own transaction, after the record's: a purge can never cost a response its record.
    """
    try:
        with uow.transaction() as tx:
            cutoff = tx.now - ttl(tx.settings)
            tx.session.execute(
                delete(m.IdempotencyRecord).where(col(m.IdempotencyRecord.created_at) < cutoff)
            )
    except (SQLAlchemyError, ConflictError):
        log.warning("expired Idempotency-Key records were not purged this time", exc_info=True)


def ttl(settings: Settings) -> timedelta:
    """How long a record is honoured."""
    return timedelta(hours=settings.idempotency_ttl_hours)


def _recordable(keyed: KeyedRequest, status: int) -> bool:
    if status >= 500:
        return False
    return keyed.committed or 200 <= status < 300


def _named(keyed: KeyedRequest) -> tuple[Any, ...]:
    record = m.IdempotencyRecord
    return (
        col(record.principal) == keyed.principal,
        col(record.method) == keyed.method,
        col(record.path) == keyed.path,
        col(record.key) == keyed.key,
    )


def _live_row(
    session: Session, keyed: KeyedRequest, cutoff: datetime
) -> m.IdempotencyRecord | None:
    query = select(m.IdempotencyRecord).where(
        *_named(keyed), col(m.IdempotencyRecord.created_at) >= cutoff
    )
    return session.exec(query).first()


def _record(keyed: KeyedRequest, tx: Tx) -> m.IdempotencyRecord:
    return m.IdempotencyRecord(
        principal=keyed.principal,
        method=keyed.method,
        path=keyed.path,
        key=keyed.key,
        fingerprint=keyed.fingerprint,
        created_at=tx.now,
    )


def _fill(row: m.IdempotencyRecord, outcome: Outcome) -> None:
    row.status = outcome.status
    row.body = outcome.body
    row.headers = json.dumps(outcome.headers, sort_keys=True)
    row.secret_withheld = outcome.secret_withheld
