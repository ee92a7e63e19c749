"""Path and header parameters that several routes take, each described once for OpenAPI.

Only the documentation is declared here: the types, defaults and validation are the ones the
routes had (a name that matches no resource is that resource's 404 problem).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Header, Path

from tenancy.schemas import SLUG_PATTERN

SLUG_TEXT = f"a slug ({SLUG_PATTERN})"
UUID_TEXT = "a UUID (e.g. 3f2b8c1e-5d4a-4e8f-9b7c-2a1d0e6f4c3b)"

FabricPath = Annotated[
    str,
    Path(
        description=f"The fabric's name as registered, {SLUG_TEXT}, e.g. 'ib-east'; "
        "404 when no fabric has it"
    ),
]
TenantPath = Annotated[
    str,
    Path(
        description=f"The tenant's name, {SLUG_TEXT}, e.g. 'acme'; 404 when it does not exist "
        "or the caller holds no role in it (the two are indistinguishable)"
    ),
]
NodePath = Annotated[
    str,
    Path(
        description="The node's name: the host name of its HCAs' NodeDescription on InfiniBand "
        "('gpu0001' of \"gpu0001 mlx5_0\"), the inventory's host name on RoCE; lower-case "
        "letters, digits, '.', '_' and '-', at most 63 characters"
    ),
]
ServicePath = Annotated[
    str, Path(description=f"The shared service's name on the fabric, {SLUG_TEXT}, e.g. 'storage'")
]
AllocationIdPath = Annotated[
    str, Path(description=f"The allocation's id, {UUID_TEXT}, as the allocation's `id` gives it")
]
GrantIdPath = Annotated[
    str, Path(description=f"The grant's id, {UUID_TEXT}, as the grant's `id` gives it")
]
PeeringIdPath = Annotated[
    str, Path(description=f"The peering's id, {UUID_TEXT}, as the peering's `id` gives it")
]
ProofIdPath = Annotated[
    str, Path(description=f"The stored proof's id, {UUID_TEXT}, as the proof's `id` gives it")
]
TokenIdPath = Annotated[
    str,
    Path(
        description=f"The token's id, {UUID_TEXT}, as the token's `id` gives it (never its "
        "secret); 404 for a tenant admin when the token belongs to another tenant"
    ),
]
ArtifactPath = Annotated[
    str,
    Path(
        description="The file's path in the artifact manifest, slashes included: "
        "'opensm/partitions.conf', 'opensm/qos-policy.conf', 'opensm/opensm.conf' on "
        "InfiniBand; "
        "'sonic/<leaf>/config_db.json', 'frr/<leaf>/frr.conf' on RoCE"
    ),
]
IfNoneMatch = Annotated[
    str | None,
    Header(
        description="RFC 9110 conditional request: the ETag (the quoted hex sha256 of the body) "
        "of a copy the client holds, a comma-separated list of them, or '*'; compared weakly. "
        "A match answers 304 with no body"
    ),
]
