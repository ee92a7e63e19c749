"""Config audits and observed-state drift: deployed files and live tables against the record.

Both are read-only: they load the fabric's current snapshot, hand it with the caller's document
to the pure engine (policies/config_audit.py, policies/infiniband/observations.py) and shape the
report.
Nothing is stored and nothing is audit-logged.
"""

from __future__ import annotations

from policies.config_audit import (
    REACHABILITY_SCOPE,
    AuditFormat,
    AuditReport,
    audit_config_db,
    audit_frr,
    audit_partitions,
)
from policies.errors import InvalidValueError
from policies.infiniband.model import IbSnapshot, format_guid, format_pkey
from policies.infiniband.observations import compare_observation
from policies.model import FabricKind
from policies.roce.model import RoceSnapshot
from tenancy import models as m
from tenancy.gate.verification import counterexample_view, edge_view
from tenancy.record.snapshot import load_snapshot
from tenancy.schemas import (
    AuditFindingView,
    ConfigAuditView,
    DriftView,
    ObservationCreate,
    ObservationView,
    PortDriftView,
    UnobservedPortView,
)
from tenancy.store.lookups import fabric_named
from tenancy.store.uow import UnitOfWork
from tenancy.technology import require_technology

_FORMAT_KIND = {
    AuditFormat.PARTITIONS: FabricKind.INFINIBAND,
    AuditFormat.CONFIG_DB: FabricKind.ROCE,
    AuditFormat.FRR: FabricKind.ROCE,
}


def audit_config(
    uow: UnitOfWork, *, fabric_name: str, fmt: str, leaf: str | None, text: str
) -> ConfigAuditView:
    """Audit a deployed partitions.conf, config_db.json or frr.conf against the fabric's intent.

    Raises:
        InvalidValueError: unknown format, a format of the other technology, a leaf given for
            partitions.conf, or a leaf that is not a leaf switch of the fabric.
        InputFormatError: a config_db.json that does not parse.
    """
    try:
        audit_format = AuditFormat(fmt)
    except ValueError as error:
        raise InvalidValueError(f"unknown audit format '{fmt}'", format=fmt) from error
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        _check_kind(fabric, audit_format)
        snapshot = load_snapshot(tx.session, fabric)
    report, leaf = _run(snapshot, audit_format, leaf, text)
    return ConfigAuditView(
        fabric=fabric_name,
        format=audit_format.value,
        leaf=leaf,
        snapshot_digest=snapshot.digest,
        holds=report.holds,
        findings=[
            AuditFindingView(
                code=f.code,
                severity=f.severity.value,
                line=f.line,
                # config_db findings name their key in the message, as they always have.
                message=f"{f.key}: {f.message}" if _keyed(audit_format, f.key) else f.message,
            )
            for f in report.findings
        ],
        drift=[
            DriftView(
                owner=d.owner,
                segment=d.segment,
                added=list(d.added),
                missing=list(d.missing),
                changed=list(d.changed),
            )
            for d in report.drift
        ],
        counterexamples=[counterexample_view(c, fabric.kind) for c in report.counterexamples],
        reachability=[edge_view(e, fabric.kind) for e in report.reachability],
        reachability_scope=REACHABILITY_SCOPE[audit_format],
    )


def _keyed(audit_format: AuditFormat, key: str | None) -> bool:
    return key is not None and audit_format is AuditFormat.CONFIG_DB


def _check_kind(fabric: m.Fabric, audit_format: AuditFormat) -> None:
    if fabric.kind != _FORMAT_KIND[audit_format]:
        raise InvalidValueError(
            f"format '{audit_format.value}' does not apply to {fabric.kind} fabric '{fabric.name}'",
            format=audit_format.value,
        )


def _run(
    snapshot: IbSnapshot | RoceSnapshot, audit_format: AuditFormat, leaf: str | None, text: str
) -> tuple[AuditReport, str | None]:
    if isinstance(snapshot, IbSnapshot):
        if leaf is not None:
            raise InvalidValueError("'leaf' applies to config_db and frr audits only", leaf=leaf)
        return audit_partitions(snapshot, text), None
    leaves = {s.name for s in snapshot.leaves()}
    if leaf is None or leaf not in leaves:
        raise InvalidValueError(
            f"'leaf' must name a leaf switch of fabric '{snapshot.fabric.name}' "
            f"({', '.join(sorted(leaves))})",
            leaf=leaf,
        )
    if audit_format is AuditFormat.CONFIG_DB:
        return audit_config_db(snapshot, leaf, text), leaf
    return audit_frr(snapshot, leaf, text), leaf


def observe(uow: UnitOfWork, *, fabric_name: str, document: ObservationCreate) -> ObservationView:
    """Drift of a live InfiniBand fabric's P_Key tables from intent, and what they allow."""
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        require_technology(
            fabric, FabricKind.INFINIBAND, "observations apply to InfiniBand fabrics"
        )
        snapshot = load_snapshot(tx.session, fabric)
    assert isinstance(snapshot, IbSnapshot)
    tables, failed = _observed_tables(document)
    report = compare_observation(snapshot, tables, unobserved=failed.keys())
    nodes = {p.guid: p.node for p in snapshot.ports}
    return ObservationView(
        fabric=fabric_name,
        snapshot_digest=snapshot.digest,
        holds=report.holds,
        ports=[
            PortDriftView(
                guid=format_guid(p.guid),
                node=p.node,
                owner=str(p.owner),
                missing=[format_pkey(k) for k in p.missing],
                unexpected=[format_pkey(k) for k in p.unexpected],
            )
            for p in report.ports
        ],
        counterexamples=[
            counterexample_view(c, FabricKind.INFINIBAND) for c in report.verdict.counterexamples
        ],
        unobserved=[
            UnobservedPortView(guid=format_guid(guid), node=nodes.get(guid, "?"), error=error)
            for guid, error in sorted(failed.items())
        ],
    )


def _observed_tables(document: ObservationCreate) -> tuple[dict[int, list[int]], dict[int, str]]:
    """The tables read (GUID -> P_Keys), and the ports not read (GUID -> error).

    A port listed twice merges its tables; it is unobserved only when no listing was read.
    """
    tables: dict[int, list[int]] = {}
    failed: dict[int, str] = {}
    for port in document.ports:
        guid = int(port.guid, 16)
        if port.pkeys is None:
            failed.setdefault(guid, port.error or "")
        else:
            tables.setdefault(guid, []).extend(int(k, 16) for k in port.pkeys)
    return tables, {guid: error for guid, error in failed.items() if guid not in tables}
