"""Topology import: reconcile a fabric's inventory with `ibnetdiscover` output.

New ports are added; ports that vanished are removed, except those of held nodes, which are
kept (and reported) so that an allocation never loses ports silently. A known port GUID that now
claims another host moves only under the rule of `tenancy.record.port_identity`. Nodes and switches
are never deleted: those an import no longer lists are kept, marked absent, until one lists them
again. The InfiniBand reconcile is tenancy/usecases/ib_topology.py (its cost follows what changed),
RoCE's tenancy/usecases/roce_topology.py.
"""

from __future__ import annotations

from policies.errors import UnsupportedMediaTypeError
from policies.infiniband.parse_ibnetdiscover import parse_ibnetdiscover
from policies.model import FabricKind
from tenancy import models as m
from tenancy.gate.change_check import ChangeScope
from tenancy.gate.verification import commit_gate
from tenancy.schemas import RoceInventory, TopologyImportResult
from tenancy.store.documents import parse_inventory
from tenancy.store.locks import lock_fabric
from tenancy.store.lookups import fabric_named
from tenancy.store.uow import UnitOfWork
from tenancy.technology import require_technology, technology_of
from tenancy.usecases.ib_topology import discovery_of, reconcile
from tenancy.usecases.roce_topology import reconcile_roce_topology, validate_inventory


def import_document(
    uow: UnitOfWork, *, fabric_name: str, media_type: str, text: str
) -> TopologyImportResult:
    """Import an inventory in the format the fabric takes; any other format is a 415.

    InfiniBand takes ibnetdiscover output (text/plain); RoCE takes an inventory document
    (application/json or application/yaml).
    """
    with uow.transaction(read_only=True) as tx:
        technology = technology_of(fabric_named(tx.session, fabric_name).kind)
    if not technology.accepts_topology(media_type):
        raise UnsupportedMediaTypeError(
            f"fabric '{fabric_name}' is {technology.kind}: its topology is "
            f"{technology.topology_wanted}, not '{media_type}'"
        )
    if technology.kind is FabricKind.ROCE:
        inventory = parse_inventory(text, media_type)
        return import_roce_topology(uow, fabric_name=fabric_name, inventory=inventory)
    return import_topology(uow, fabric_name=fabric_name, text=text)


def import_roce_topology(
    uow: UnitOfWork, *, fabric_name: str, inventory: RoceInventory
) -> TopologyImportResult:
    """Reconcile a RoCE fabric with an inventory document; verified before commit.

    Raises:
        InvalidValueError: the document's parts do not fit together; nothing was written.
        PortMovedError: a known NIC is re-cabled, or a switch port claimed by another host,
            while a host involved guards its ports; nothing was written.
    """
    validate_inventory(inventory)
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        require_technology(fabric, FabricKind.ROCE, "PUT ibnetdiscover output as text/plain")
        result = reconcile_roce_topology(tx, fabric, inventory)
        commit_gate(tx, fabric, "topology.import", f"fabrics/{fabric.name}/topology")
        return result


def import_topology(uow: UnitOfWork, *, fabric_name: str, text: str) -> TopologyImportResult:
    """Parse `text` (ibnetdiscover output) and reconcile the fabric's switches, nodes and ports.

    Raises:
        InputFormatError: the text is malformed (naming the line); nothing was written.
        PortMovedError: a known port GUID claims another host while either host guards its
            ports (held, storage or management); nothing was written.
    """
    # Parsing and keying the file is CPU work on the request's own data: done before the
    # transaction, so that the write lock is held only to compare and write (and verify).
    discovery = discovery_of(parse_ibnetdiscover(text))
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        require_technology(
            fabric,
            FabricKind.INFINIBAND,
            "PUT its inventory as application/json or application/yaml",
        )
        outcome = reconcile(tx.session, m.pk(fabric), discovery)
        # An import that changed no port left the snapshot as committed (and verified): the
        # gate checks an empty scope, which costs nothing, and audits the import all the same.
        # Any other import is verified whole (tenancy/gate/change_check.py).
        scope = None if outcome.ports_changed else ChangeScope()
        commit_gate(tx, fabric, "topology.import", f"fabrics/{fabric.name}/topology", scope)
    return outcome.result()  # after the commit: a first import's 100k added ports take a while
