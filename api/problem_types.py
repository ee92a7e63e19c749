"""The one table of problem types: each domain error's slug, HTTP status, title and meaning.

api/problems.py turns errors into responses with it; api/problem_pages.py publishes it at
``/problems`` and in the OpenAPI description.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.errors import (
    ArtifactHazardError,
    AuthenticationError,
    ConflictError,
    DatabaseUnavailableError,
    DisruptiveChangeError,
    ForbiddenError,
    IdempotencyInProgressError,
    IdempotencyKeyReusedError,
    InputFormatError,
    InvalidValueError,
    IsofabricError,
    IsolationViolationError,
    KeyUnavailableError,
    NotFoundError,
    NotReadyError,
    NotRetainedError,
    PatchRefusedError,
    PoolExhaustedError,
    PoolShareExceededError,
    PortMovedError,
    SecretNotReplayedError,
    TooManyRequestsError,
    UnsupportedMediaTypeError,
)


@dataclass(frozen=True, slots=True)
class ProblemType:
    """A problem type of the API: its slug (a stable part of the contract), status and title.

    `description` says what the problem means and what the client can do about it; it is
    published at ``/problems/<slug>`` and in the OpenAPI description (api/problem_pages.py).
    """

    slug: str
    status: int
    title: str
    description: str = ""

    @property
    def uri(self) -> str:
        """The ``type`` member: ``/problems/<slug>``."""
        # RFC 9457 §3.1.1: a URI reference; relative ones resolve against the service's base URL.
        return f"/problems/{self.slug}"


# Most specific class first: lookup walks the exception's MRO.
PROBLEM_TYPES: dict[type[IsofabricError], ProblemType] = {
    IsolationViolationError: ProblemType(
        "isolation-violation",
        409,
        "Isolation violation",
        "The change would let two tenants (or a tenant and a service it was not granted) reach "
        "each other; nothing was changed. `counterexamples` names each pair of endpoints, their "
        "owners and the segment: change the request, or the state it conflicts with.",
    ),
    PoolExhaustedError: ProblemType(
        "pool-exhausted",
        409,
        "Identifier pool exhausted",
        "No free P_Key, VLAN, L2VNI, L3VNI or subnet is left in the fabric's range (released ones "
        "are quarantined first). Offboard unused tenants or services, or wait for the quarantine.",
    ),
    PoolShareExceededError: ProblemType(
        "pool-share-exceeded",
        409,
        "Share of an identifier pool exceeded",
        "Taking the value would let a tenant hold more of the fabric's P_Keys (or VLANs, VNIs) "
        "than the policy's `max_pool_share_percent` of its kind allows; `tenant`, `pool` and "
        "`limit` say whose share and how many. Released values count until their quarantine ends "
        "(every deploy target has read back their release). End unused peerings, wait for the "
        "deploy agents, or ask an operator.",
    ),
    PortMovedError: ProblemType(
        "port-moved",
        409,
        "Port claims another host",
        "The import moves ports (`moved`: port, from, to) to another host while either host is "
        "held. Release the host first, or correct the document if the move is a mistake.",
    ),
    IdempotencyInProgressError: ProblemType(
        "idempotency-in-progress",
        409,
        "A request with this key is in progress",
        "Another request with the same Idempotency-Key has not answered yet (or failed after "
        "committing); this one changed nothing. Retry later with the same key to get the "
        "first request's response.",
    ),
    SecretNotReplayedError: ProblemType(
        "secret-not-replayed",
        409,
        "Secret not replayed",
        "The first request with this Idempotency-Key created a token, whose secret is shown "
        "once and never stored. `token_id` names it: use the secret you received then, or "
        "revoke that token and create another with a new key.",
    ),
    PatchRefusedError: ProblemType(
        "patch-refused",
        409,
        "CONFIG_DB patch refused",
        "A SONiC CONFIG_DB patch would touch a key isofabric does not own on the leaf "
        "(`foreign`) or a declared key such as a port, a fabric-wide QoS map or a buffer "
        "(`disruptive`) without the explicit flag; nothing was applied. `refused` names each "
        "operation's path and reason: fix the leaf's foreign configuration, or allow the "
        "disruptive change in a maintenance window.",
    ),
    DisruptiveChangeError: ProblemType(
        "disruptive-change",
        409,
        "Disruptive change",
        "The patch between the two snapshots changes declared CONFIG_DB keys of the leaf "
        "(ports, fabric-wide QoS maps, schedulers, queues, buffers), which can restart swss. "
        "`paths` lists them; ask again with `allow_disruptive=true` to get them in the patch.",
    ),
    ConflictError: ProblemType(
        "conflict",
        409,
        "Conflict with current state",
        "The request contradicts the current state: a name is taken, a node is already "
        "allocated or draining, a tenant is offboarded, the placement policy leaves too few "
        "nodes. `detail` says which; read the resource, then change the request.",
    ),
    NotRetainedError: ProblemType(
        "not-retained",
        410,
        "No longer retained",
        "The resource existed but its content is no longer kept (a snapshot's artifacts beyond "
        "ISOFABRIC_SNAPSHOT_RETAIN and ISOFABRIC_PROOF_RETAIN); its digest stays in the audit "
        "log. Ask for a retained one, or verify offline against files you kept.",
    ),
    NotFoundError: ProblemType(
        "not-found",
        404,
        "Resource not found",
        "The named resource does not exist, or the caller has no role in the tenant it belongs "
        "to (a tenant role never learns that another tenant exists). Check the name and the "
        "token's tenant.",
    ),
    InputFormatError: ProblemType(
        "invalid-document",
        422,
        "Document does not parse",
        "An uploaded document (ibnetdiscover output, a RoCE inventory, partitions.conf, a "
        "policy) does not parse; `line`, when present, is where parsing stopped. Fix the "
        "document and send it again.",
    ),
    UnsupportedMediaTypeError: ProblemType(
        "unsupported-media-type",
        415,
        "Unsupported media type",
        "The body's Content-Type does not fit the resource (JSON routes take application/json; "
        "an InfiniBand topology is ibnetdiscover text). Send the body in the format the "
        "operation documents.",
    ),
    IdempotencyKeyReusedError: ProblemType(
        "idempotency-key-reused",
        422,
        "Idempotency key used for another request",
        "The Idempotency-Key already named another request (another path, query or body) of "
        "this caller; nothing was done. Use a new key for a new request.",
    ),
    InvalidValueError: ProblemType(
        "validation-error",
        422,
        "Invalid value",
        "A parameter or body member is missing, malformed or outside what the domain allows. "
        "`errors` lists each one with a JSON pointer into the request (`/body/name`, "
        "`/query/limit`) when the request's shape is at fault; correct those values.",
    ),
    AuthenticationError: ProblemType(
        "unauthorized",
        401,
        "Authentication required",
        "The /v1 request has no valid `Authorization: Bearer <token>` (missing, unknown, "
        "expired or revoked), or the service is in open mode and the caller is not on its "
        "host. Send a valid token; `isofabric token create` makes one.",
    ),
    ForbiddenError: ProblemType(
        "forbidden",
        403,
        "Forbidden",
        "The token is valid but its role may not do this (for example a tenant-viewer "
        "changing something, or an auditor reading opensm.conf). Use a token with a role "
        "that may.",
    ),
    ArtifactHazardError: ProblemType(
        "artifact-hazard",
        500,
        "Artifact failed its safety check",
        "A rendered file failed its own safety check (for example a partitions.conf OpenSM "
        "would read as fail-open); it was not served. This is a defect of the service, not of "
        "the request: report it with the X-Request-ID.",
    ),
    DatabaseUnavailableError: ProblemType(
        "database-unavailable",
        503,
        "Database unavailable",
        "The database did not answer or failed the transaction (connection lost, server "
        "restarting, not migrated yet); the service keeps running. Retry later; /readyz says "
        "when the service can take traffic again.",
    ),
    NotReadyError: ProblemType(
        "not-ready",
        503,
        "Not ready",
        "The server cannot take traffic yet; `not_ready` names each reason (database "
        "unreachable, schema not at this version's head, a key missing). Fix those, or send "
        "traffic to another replica.",
    ),
    KeyUnavailableError: ProblemType(
        "key-unavailable",
        503,
        "Key not installed",
        "The audit signing key or the OpenSM secret is not installed, so the service cannot "
        "sign or render; `missing` lists them. An operator runs `isofabric keys create` (or "
        "copies the key files to every replica).",
    ),
    TooManyRequestsError: ProblemType(
        "too-many-requests",
        429,
        "Too many requests",
        "The caller already has as many heavy requests (topology imports, config audits) in "
        "flight as it may. Wait the Retry-After seconds, then retry.",
    ),
}
INTERNAL = ProblemType(
    "internal-error",
    500,
    "Internal server error",
    "The service failed to handle the request and changed nothing; the trace is in its log. "
    "Retry, and report it with the X-Request-ID if it persists.",
)
