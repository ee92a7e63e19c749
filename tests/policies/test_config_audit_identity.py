"""A deployed file belongs to one device, and granted leaks are reachability, not findings.

Hardening issue 10, item 22: leaf02's frr.conf or config_db.json audited as leaf01 used to
report nothing, and a byte-identical rendered frr.conf reported two `info` findings about the
granted storage route leak.
"""

import pytest

from policies.config_audit import audit_config_db, audit_frr
from policies.findings import Severity
from policies.model import Owner
from policies.roce.render_frr import render_frr_conf
from policies.roce.render_sonic import render_config_db_json

from .roce_snapshots import roce_snapshot

AUDITS = {
    "frr": (render_frr_conf, audit_frr),
    "config_db": (render_config_db_json, audit_config_db),
}


@pytest.mark.parametrize("fmt", sorted(AUDITS))
def test_another_leafs_file_is_a_critical_finding(fmt):
    render, audit = AUDITS[fmt]
    snapshot = roce_snapshot()

    report = audit(snapshot, "leaf01", render(snapshot, "leaf02"))

    other = [f for f in report.findings if f.code == "other-device"]
    assert len(other) == 1
    assert other[0].severity is Severity.CRITICAL
    assert "hostname leaf02" in other[0].message
    assert report.critical


@pytest.mark.parametrize("fmt", sorted(AUDITS))
def test_the_leafs_own_rendered_file_names_no_other_device(fmt):
    render, audit = AUDITS[fmt]
    snapshot = roce_snapshot()

    report = audit(snapshot, "leaf01", render(snapshot, "leaf01"))

    assert not [f for f in report.findings if f.code == "other-device"]


def test_a_rendered_frr_conf_reports_the_granted_leak_as_reachability_not_findings():
    snapshot = roce_snapshot()
    granted = {(g.tenant, g.service) for g in snapshot.grants}
    assert granted, "the sample grants storage to a tenant"

    report = audit_frr(snapshot, "leaf01", render_frr_conf(snapshot, "leaf01"))

    assert report.findings == ()
    assert report.holds
    edges = {(str(e.source), str(e.target)) for e in report.reachability}
    for tenant, service in granted:
        if any(n.owners == (Owner.tenant(tenant),) for n in snapshot.nodes):
            assert (str(Owner.tenant(tenant)), str(Owner.service(service))) in edges
    assert all(edge.allowed for edge in report.reachability)


def test_an_ungranted_import_is_still_reported():
    snapshot = roce_snapshot()
    text = render_frr_conf(snapshot, "leaf01")
    # A tenant VRF that imports another tenant's route target: a leak nobody granted.
    leaked = text.replace("route-target import 65000:50000", "route-target import 65000:50002", 1)
    assert leaked != text

    report = audit_frr(snapshot, "leaf01", leaked)

    assert not report.holds
