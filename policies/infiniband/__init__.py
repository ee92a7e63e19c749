"""InfiniBand: partitions (P_Keys), their verification, OpenSM's files, and parsers.

The parsers read files back: partitions.conf with OpenSM's grammar, ibnetdiscover output and
observed P_Key tables.

Imports only the shared engine modules; never `policies.roce`.
"""

from policies.infiniband.intent import plan_partitions, ports_by_owner
from policies.infiniband.model import (
    DEFAULT_PKEY,
    IbPort,
    IbSettings,
    IbSnapshot,
    Member,
    Partition,
    QosClass,
    VirtualGuid,
    format_guid,
    format_pkey,
)
from policies.infiniband.observations import compare_observation, observed_snapshot
from policies.infiniband.parse_ibnetdiscover import DiscoveredTopology, parse_ibnetdiscover
from policies.infiniband.parse_partitions import ParsedPartitions, parse_partitions_conf
from policies.infiniband.render import SubnetManagerKeys, render_opensm_artifacts
from policies.infiniband.verify import verify_isolation
from policies.infiniband.virtual import UnobservedMembership, unobserved_memberships

__all__ = [
    "DEFAULT_PKEY",
    "DiscoveredTopology",
    "IbPort",
    "IbSettings",
    "IbSnapshot",
    "Member",
    "ParsedPartitions",
    "Partition",
    "QosClass",
    "SubnetManagerKeys",
    "UnobservedMembership",
    "VirtualGuid",
    "compare_observation",
    "format_guid",
    "format_pkey",
    "observed_snapshot",
    "parse_ibnetdiscover",
    "parse_partitions_conf",
    "plan_partitions",
    "ports_by_owner",
    "render_opensm_artifacts",
    "unobserved_memberships",
    "verify_isolation",
]
