"""Config audits of deployed files and observed P_Key tables."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Self

from pydantic import (
    BaseModel,
    Field,
    StrictInt,
    model_validator,
)

from tenancy.schemas.common import (
    HEX_GUID_PATTERN,
    HEX_PKEY_PATTERN,
    Strict,
)
from tenancy.schemas.verification import (
    CounterexampleView,
    EdgeView,
)

AUDIT_FORMAT_PATTERN = "^(partitions|config_db|frr)$"


class AuditFindingView(BaseModel):
    """A parser finding about the audited file: a construct the software rejects or misreads.

    `severity` is ``critical``, ``error``, ``warning`` or ``info``; `line` is 1-based, null for
    file-wide findings and for JSON.
    """

    code: str = Field(description="The finding's kind, kebab-case, e.g. 'duplicate-rd'")
    severity: str = Field(
        description="'critical' (the software would fail open or isolation silently changes), "
        "'error' (it refuses the construct or applies it differently), 'warning' or 'info'"
    )
    line: int | None = Field(
        description="1-based line in the file; null for file-wide findings and for JSON"
    )
    message: str = Field(description="What is wrong, for people")


class DriftView(BaseModel):
    """What the audited file adds to (`added`) or lacks from (`missing`) one owner's segment.

    `owner` is ``tenant:acme`` (null for a segment no owner holds); `segment` is the P_Key
    (``0x0101``), the VLAN (``Vlan102``) or the VRF (``Vrf50001``). Items are port GUIDs, switch
    ports or route targets; `changed` lists GUIDs whose membership (full/limited) differs.
    """

    owner: str | None = Field(
        description="'tenant:<name>' or 'service:<name>'; null for a segment no owner holds"
    )
    segment: str = Field(
        description="The P_Key ('0x0101'), the VLAN ('Vlan102') or the VRF ('Vrf50001')"
    )
    added: list[str] = Field(
        description="Port GUIDs, switch ports or route targets the file has beyond intent"
    )
    missing: list[str] = Field(description="Those intent has and the file lacks")
    changed: list[str] = Field(
        default=[],
        description="Port GUIDs whose membership (full or limited) differs from intent",
    )


class ConfigAuditView(BaseModel):
    """Response of a config audit: a deployed file checked against the fabric's intent.

    `holds` is true when the file allows no isolation violation (no counterexample). `leaf` names
    the audited leaf (config_db and frr only); `snapshot_digest` names the intended state the
    file was compared with. Nothing is stored.
    """

    fabric: str = Field(description="The fabric's name")
    format: str = Field(description="'partitions', 'config_db' or 'frr', as asked")
    leaf: str | None = Field(description="The audited leaf; null for partitions")
    snapshot_digest: str = Field(description="The intended state the file was compared with")
    holds: bool = Field(description="True when the file allows no isolation violation")
    findings: list[AuditFindingView] = Field(description="What the parser found in the file")
    drift: list[DriftView] = Field(description="Per owner's segment: how the file differs")
    counterexamples: list[CounterexampleView] = Field(
        description="Isolation violations the file allows; empty when `holds`"
    )
    reachability: list[EdgeView] = Field(
        default_factory=list,
        description="Intended reachability the file grants between different owners, reported "
        "as such, not as a finding; `reachability_scope` says what the format can show",
    )
    reachability_scope: str = Field(
        default="",
        description="What `reachability` is derived from, so that an empty list is read "
        "right: 'partitions' every P_Key's members (the whole fabric); 'config_db' this "
        "leaf's VLAN members (L2 only: routed reachability is in its frr.conf); 'frr' this "
        "leaf's VRF route-target imports",
    )


class ObservedPort(Strict):
    """One HCA port as collected: GUID, LID, and its live P_Key table or why it was not read.

    `pkeys` holds up to 128 P_Keys in hex. A port with an `error` instead is not observed: the
    comparison leaves it out (it is never read as a port without P_Keys) and the report lists it
    under `unobserved`. Exactly one of the two is present.
    """

    guid: Annotated[
        str,
        Field(pattern=HEX_GUID_PATTERN, description="Port GUID, 0x and 1-16 hex digits"),
    ]
    # IBA: a LID is 16 bits (0 while the SM has not assigned one).
    lid: Annotated[
        StrictInt,
        Field(
            ge=0,
            le=0xFFFF,
            description="The port's LID, 0-65535 (0: not assigned yet); carried, not compared",
        ),
    ]
    pkeys: Annotated[
        list[Annotated[str, Field(pattern=HEX_PKEY_PATTERN)]] | None,
        Field(max_length=128, description="The port's P_Key table; absent when `error` is set."),
    ] = None
    error: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=4096,
            description="Why the table could not be read (the port is then not observed).",
        ),
    ] = None

    @model_validator(mode="after")
    def _read_or_failed(self) -> Self:
        if (self.pkeys is None) == (self.error is None):
            raise ValueError("a port has either 'pkeys' (read) or 'error' (not read)")
        return self


class ObservationCreate(BaseModel):
    """What ``isofabric collect ib`` prints; unknown members are ignored."""

    kind: Literal["infiniband"] = Field(description="'infiniband': P_Key tables of HCA ports")
    collected_at: datetime | None = Field(
        default=None,
        description="When the tables were read, RFC 3339; carried for the record, not compared",
    )
    ibnetdiscover: Annotated[
        str,
        Field(
            max_length=16_000_000,
            description="The ibnetdiscover text read with the tables (up to 16 MB); carried "
            "for the record, not compared",
        ),
    ] = ""
    ports: Annotated[
        list[ObservedPort],
        Field(max_length=100_000, description="Each HCA port read, or why not (up to 100,000)"),
    ]


class UnobservedPortView(BaseModel):
    """A port the collector could not read: left out of the comparison, with the reason.

    `node` is the node the fabric's record places the port on (``?`` for a port it does not
    know).
    """

    guid: str = Field(description="The port GUID (``0x`` and 16 hex digits).")
    node: str = Field(description="The node the port belongs to in the record, or ``?``.")
    error: str = Field(description="Why the collector could not read the port's table.")


class PortDriftView(BaseModel):
    """One port whose live P_Key table differs from intent, and the port's owner.

    `missing` are intended keys the table lacks, `unexpected` keys it has beyond intent; keys are
    16-bit P_Keys (bit 15 set = full member).
    """

    guid: str = Field(description="Port GUID, 0x-prefixed 16-digit lower-case hex")
    node: str = Field(description="The node the port belongs to")
    owner: str = Field(
        description="Who holds the node: 'tenant:<name>', 'service:<name>' or 'unassigned:<node>'"
    )
    missing: list[str] = Field(description="Intended P_Keys (0x-prefixed hex) the table lacks")
    unexpected: list[str] = Field(description="P_Keys the table has beyond intent")


class ObservationView(BaseModel):
    """Response to posted live P_Key tables: per-port drift from intent and what they allow.

    `holds` and `counterexamples` judge the fabric as the live tables describe it, not as
    intended; ports listed in `unobserved` could not be read and are left out. Nothing is
    stored.
    """

    fabric: str = Field(description="The fabric's name")
    snapshot_digest: str = Field(description="The intended state the tables were compared with")
    holds: bool = Field(description="Whether isolation holds as the live tables describe it")
    ports: list[PortDriftView] = Field(description="Ports whose table differs from intent")
    counterexamples: list[CounterexampleView] = Field(
        description="Isolation violations the live tables allow; empty when `holds`"
    )
    unobserved: list[UnobservedPortView] = Field(
        default_factory=list,
        description="Ports whose table could not be read: not compared, and no drift is "
        "reported for them; `holds` then judges the observed ports only.",
    )
