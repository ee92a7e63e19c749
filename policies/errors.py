"""The one hierarchy of isofabric's domain errors.

    IsofabricError
    ├── InputFormatError          a document (ibnetdiscover text, partitions.conf) does not parse
    ├── InvalidValueError           a value is outside what the domain allows
    │   ├── UnsupportedMediaTypeError  the body's format does not fit the target resource
    │   └── IdempotencyKeyReusedError  an Idempotency-Key already named another request
    ├── NotFoundError             a named resource does not exist
    ├── ConflictError             the request contradicts current state
    │   ├── PoolExhaustedError    no free identifier is left in a fabric's range
    │   ├── PoolShareExceededError  a tenant holds its share of a fabric's identifier pool
    │   ├── NoPlacementError      free nodes exist, but the policy's leaf rule leaves too few
    │   ├── PortMovedError        an import moves a port to another host while one of them is held
    │   ├── IdempotencyInProgressError  a request with the same Idempotency-Key is in progress
    │   ├── SecretNotReplayedError  the first response to this Idempotency-Key held a secret
    │   ├── PatchRefusedError     a CONFIG_DB patch touches a key isofabric does not own
    │   ├── DisruptiveChangeError  a CONFIG_DB change touches declared keys without the flag
    │   └── IsolationViolationError  the change would break isolation (carries counterexamples)
    ├── AuthenticationError       no or wrong credentials
    ├── ForbiddenError            the caller's role may not do this
    ├── TooManyRequestsError      the caller has too many heavy requests in flight (429)
    ├── KeyUnavailableError       the signing key or OpenSM secret is not installed (503)
    ├── DatabaseUnavailableError  the database does not answer, or is not migrated yet (503)
    ├── NotReadyError             the server cannot take traffic yet: /readyz says why (503)
    └── ArtifactHazardError       a rendered file would be misread by the software consuming it

`api/problem_types.py` maps each class to an RFC 9457 problem type in one table; tenancy
raises these, never HTTP errors.
"""

from __future__ import annotations

from typing import Any


class IsofabricError(Exception):
    """Base of every domain error; `detail` is safe to show to the caller."""

    def __init__(self, detail: str, **extensions: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extensions = extensions


class InputFormatError(IsofabricError):
    """A document does not parse; `line` is the 1-based line the problem was found on."""

    def __init__(self, detail: str, *, line: int | None = None, **extensions: Any) -> None:
        if line is not None:
            detail = f"line {line}: {detail}"
            extensions["line"] = line
        super().__init__(detail, **extensions)
        self.line = line


class InvalidValueError(IsofabricError):
    """A value is syntactically fine but outside what the domain allows."""


class NotFoundError(IsofabricError):
    """A named resource does not exist (or is not visible to the caller)."""


class NotRetainedError(NotFoundError):
    """The resource existed but its content is no longer kept (a pruned snapshot's artifacts)."""


class ConflictError(IsofabricError):
    """The request contradicts the current state (name taken, node already allocated, ...)."""


class PoolExhaustedError(ConflictError):
    """No free identifier is left in the fabric's range."""


class PoolShareExceededError(ConflictError):
    """A tenant role's take would make a tenant hold more than its share of a pool (409).

    The share is the policy's `max_pool_share_percent` of the tenant's kind; quarantined values
    count until their quarantine ends. The extensions name the ``tenant``, the ``fabric``, the
    ``pool`` (``pkey``, ``vlan``, ...) and the ``limit`` (values the tenant may hold of it).
    """


class NoPlacementError(ConflictError):
    """A `count` allocation found enough free nodes, but too few the policy lets it place.

    Under ``dedicated_leaf`` a node may not be cabled to a leaf holding another tenant's port,
    and no tenant may be placed on a dedicated tenant's leaf (`policies.placement`). The
    extensions count the nodes ``requested``, ``available`` (free) and ``placeable``.
    """


class PortMovedError(ConflictError):
    """A topology import moves known ports to another host while the old or the new host is held.

    Port identity is the port GUID (InfiniBand) or the (node, NIC) cabled to a switch port
    (RoCE); a NodeDescription or an inventory line is only a claim. The extension ``moved`` lists
    each refused move as ``{"port", "from", "to"}``.
    """


class IsolationViolationError(ConflictError):
    """A mutation was refused because the resulting snapshot would not be isolated."""


class PatchRefusedError(ConflictError):
    """A CONFIG_DB patch was refused before anything was applied (policies/roce/patch.py).

    It touches a key isofabric does not own on the leaf ("foreign"), or a declared key
    (fabric-wide QoS, ports, buffers, the VTEP) without ``--allow-disruptive`` ("disruptive").
    The extension ``refused`` lists each offending operation as ``{"op", "path", "reason"}``.
    """


class DisruptiveChangeError(ConflictError):
    """The change between two snapshots touches declared CONFIG_DB keys of a leaf (409).

    Declared keys (ports, fabric-wide QoS maps, schedulers, queues, buffers) can restart swss;
    a patch that changes them is served only when asked for explicitly (``allow_disruptive``).
    The extension ``paths`` lists the JSON Pointers of the declared changes.
    """


class AuthenticationError(IsofabricError):
    """The request carries no credentials or wrong ones."""


class ArtifactHazardError(IsofabricError):
    """A rendered artifact failed its own safety check (an engine defect, never user input)."""


class UnsupportedMediaTypeError(InvalidValueError):
    """The request body's format does not fit the resource (e.g. JSON for an InfiniBand fabric)."""


class ForbiddenError(IsofabricError):
    """The caller is authenticated but its role does not allow the request (403)."""


class KeyUnavailableError(IsofabricError):
    """A key the service needs is not installed: the signing key or the OpenSM secret (503).

    The service never creates one on its own (replicas would race to make two); the detail names
    the file or variable it looked for and the command that creates it (``isofabric keys
    create``). The extension ``missing`` lists each absent key.
    """


class DatabaseUnavailableError(IsofabricError):
    """The database cannot be reached, or this server has not migrated it yet (503).

    The server keeps running and retries: a later request may succeed.
    """


class NotReadyError(IsofabricError):
    """The server is not ready for traffic (503): the extension ``not_ready`` names each reason.

    Reasons: the database unreachable, its schema not at this version's head, a key missing.
    """


class TooManyRequestsError(IsofabricError):
    """The caller already has as many heavy requests in flight as it may (429).

    Heavy requests (a topology import, a config audit) parse and verify whole documents; a cap
    per principal keeps one caller, read-only roles included, from taking every worker.
    `retry_after` is the number of seconds the client should wait (the Retry-After header).
    """

    def __init__(self, detail: str, *, retry_after: int = 1, **extensions: Any) -> None:
        super().__init__(detail, **extensions)
        self.retry_after = retry_after


class IdempotencyKeyReusedError(InvalidValueError):
    """An Idempotency-Key already named another request (another body or query) of the caller.

    Nothing was done: a key names one request, so a new request needs a new key.
    """


class IdempotencyInProgressError(ConflictError):
    """A request with the same Idempotency-Key has claimed it and has no recorded response yet.

    It is still running, or it failed after committing (5xx); this request changed nothing, and a
    retry gets the first response once it is recorded.
    """


class SecretNotReplayedError(ConflictError):
    """The first response to this Idempotency-Key held a secret (a token), which is never stored.

    The extension names what the first request created (``token_id``), so the client can find
    or revoke it.
    """
