"""Audit a deployed config file against the fabric's intent: findings, drift, counterexamples.

Three formats are audited: OpenSM's ``partitions.conf`` (InfiniBand), and a SONiC leaf's
``config_db.json`` or ``frr.conf`` (RoCE). Each audit reports

* findings: the parser's findings (constructs the software fails open on or misreads);
* drift: per owner and segment, what the file adds to or lacks from the intended state;
* counterexamples: isolation violations the deployed file allows. For partitions.conf the
  deployed memberships replace the intended partitions in a copy of the snapshot (the database's
  port ownership is kept) and `verify_isolation` judges it; a file OpenSM would discard makes
  every CA port a full member of 0x7fff, as OpenSM's fallback does (docs/facts/infiniband.md
  §1.6). For config_db.json and frr.conf they are derived from the parsed facts: another owner's
  port in a segment's VLAN, or a route-target import that no grant backs.

It is pure (stdlib only, no I/O). The formats and the report are `report`; the InfiniBand
audit `partitions`, the RoCE audits `roce`.
"""

from policies.config_audit.partitions import audit_partitions, deployed_snapshot, partition_drift
from policies.config_audit.report import REACHABILITY_SCOPE, AuditFormat, AuditReport, Drift
from policies.config_audit.roce import audit_config_db, audit_frr, observed_counterexamples

__all__ = [
    "REACHABILITY_SCOPE",
    "AuditFormat",
    "AuditReport",
    "Drift",
    "audit_config_db",
    "audit_frr",
    "audit_partitions",
    "deployed_snapshot",
    "observed_counterexamples",
    "partition_drift",
]
