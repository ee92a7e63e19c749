"""SQLModel tables: the system of record.

GUIDs are stored as lower-case ``0x`` hex strings because 64-bit GUIDs do not fit a signed BIGINT
on every database. Importing this package registers every table on ``SQLModel.metadata``.
"""

from tenancy.models.columns import HasId, UtcDateTime, pk, utcnow
from tenancy.models.deploy import (
    ArtifactBlob,
    DeploymentReport,
    DeployTarget,
    SnapshotFile,
    SnapshotRecord,
)
from tenancy.models.digest import DigestGroup, FabricDigest
from tenancy.models.fabric import Fabric, Node, Port, QosClass, Switch
from tenancy.models.partitions import FacadeSession, Partition, PartitionMember, VirtualGuid
from tenancy.models.peerings import Peering
from tenancy.models.policy import PolicyVersion
from tenancy.models.read_cache import CachedRead
from tenancy.models.records import (
    ApiToken,
    AuditCheckpoint,
    AuditEntry,
    DeployEpoch,
    IdempotencyRecord,
    Proof,
    SigningKey,
    UsageInterval,
)
from tenancy.models.roce import Nic, RoceFabricSettings, RoceLink, RoceSwitch, RoceSwitchPort
from tenancy.models.schedule import ScheduledRun
from tenancy.models.tenants import Allocation, Grant, NodeAssignment, Segment, Service, Tenant

__all__ = [
    "Allocation",
    "ApiToken",
    "ArtifactBlob",
    "AuditCheckpoint",
    "AuditEntry",
    "CachedRead",
    "DeployEpoch",
    "DeployTarget",
    "DeploymentReport",
    "DigestGroup",
    "Fabric",
    "FabricDigest",
    "FacadeSession",
    "Grant",
    "HasId",
    "IdempotencyRecord",
    "Nic",
    "Node",
    "NodeAssignment",
    "Partition",
    "PartitionMember",
    "Peering",
    "PolicyVersion",
    "Port",
    "Proof",
    "QosClass",
    "RoceFabricSettings",
    "RoceLink",
    "RoceSwitch",
    "RoceSwitchPort",
    "ScheduledRun",
    "Segment",
    "Service",
    "SigningKey",
    "SnapshotFile",
    "SnapshotRecord",
    "Switch",
    "Tenant",
    "UsageInterval",
    "UtcDateTime",
    "VirtualGuid",
    "pk",
    "utcnow",
]
