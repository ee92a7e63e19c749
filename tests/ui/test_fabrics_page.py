"""The fabrics overview: the demo's facts in chromium, deploy sync and verdict states.

The demo (tests/demo_db.py): ib-east (InfiniBand; acme, research, globex with two nodes each and
the storage service: 4 P_Keys held; 8 nodes allocated, 3 free) and roce-west (RoCE; 4 VRF
segments: 8 VLANs, 4 L2 VNIs, 4 L3 VNIs, 4 subnets; 8 nodes allocated); isolation holds on both.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from api.ui.pages.fabrics import human_duration, pool_row, verdict_of
from tenancy.schemas import ReportCreate, TargetCreate
from tenancy.usecases import deploy, deploy_sync
from tenancy.usecases.monitoring import FabricState, PoolUse
from tests.ui.browser import screenshot
from tests.ui.console_site import ConsoleSite
from tests.ui.test_console_session import sign_in as client_sign_in


def card(page: Page, fabric: str):
    return page.locator(f"section.fabric[data-fabric='{fabric}']")


def test_the_overview_shows_the_demo_fabrics_facts(page: Page, sign_in):
    sign_in(page, "operator")
    expect(page).to_have_url("/ui")  # the operator's home is the overview
    ib, roce = card(page, "ib-east"), card(page, "roce-west")
    expect(ib.locator(".kind")).to_have_text("InfiniBand")
    expect(roce.locator(".kind")).to_have_text("RoCE")
    for fabric in (ib, roce):
        expect(fabric.locator(".verdict")).to_have_text("isolation holds")
    pkeys = ib.locator("tr[data-pool=pkey]")
    expect(pkeys.locator(".used")).to_have_text("4")
    expect(pkeys.locator(".size")).to_have_text("32511")
    expect(pkeys.locator("svg.bar")).to_be_visible()
    expect(ib.locator("li[data-state=allocated] .count")).to_have_text("8")
    expect(ib.locator("li[data-state=free] .count")).to_have_text("2")  # gpu0007, gpu0008
    expect(ib.locator("li[data-state=management] .count")).to_have_text("1")  # sm01: never held
    expected_roce = {"vlan": "8", "l2vni": "4", "l3vni": "4", "subnet": "4"}
    for pool, used in expected_roce.items():
        expect(roce.locator(f"tr[data-pool={pool}] .used")).to_have_text(used)
    expect(roce.locator("li[data-state=allocated] .count")).to_have_text("8")
    expect(ib.locator(".no-targets")).to_be_visible()
    screenshot(page, "fabrics")


def test_the_auditor_reads_the_overview_at_its_own_url(page: Page, sign_in):
    sign_in(page, "auditor")
    page.goto("/ui/fabrics")
    expect(page.locator("section.fabric")).to_have_count(2)
    expect(page.locator("nav.nav a[aria-current=page]")).to_have_text("Fabrics")


def test_a_tenant_viewer_is_refused_the_overview(page: Page, sign_in, guard):
    guard.tolerate(r"status of 403")
    page.goto("/ui/fabrics")  # to the sign-in form, which then comes back here
    with page.expect_response(lambda r: r.url.endswith("/ui/fabrics")) as answer:
        sign_in(page, "acme-viewer")
    assert answer.value.status == 403
    expect(page.locator("h1")).to_have_text("403 · Forbidden")
    expect(page.locator("nav.nav a")).to_have_text(["My tenant", "Evidence"])


def register_targets(site: ConsoleSite) -> None:
    """ib-east gets sm-a (applied the desired snapshot: in sync) and sm-b (never reported)."""
    uow = site.uow()
    for name in ("sm-a", "sm-b"):
        deploy.put_target(uow, fabric_name="ib-east", name=name, spec=TargetCreate(kind="opensm"))
    desired = deploy_sync.sync_status(uow, fabric_name="ib-east").desired
    report = ReportCreate(state="applied", digest=desired, role="master")
    deploy.post_report(uow, fabric_name="ib-east", target_name="sm-a", report=report)


def test_deploy_targets_show_their_sync_state(site: ConsoleSite):
    register_targets(site)
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        html = client.get("/ui/fabrics").text
    assert 'data-sync="in_sync">in sync<' in html
    assert 'data-sync="unreported">never reported<' in html
    assert html.count("data-target=") == 2


def test_deploy_targets_in_the_browser(site: ConsoleSite, fresh_console, page_on, sign_in):
    register_targets(site)
    page = page_on(fresh_console)
    sign_in(page, "auditor", site)
    targets = card(page, "ib-east").locator("table.targets")
    expect(targets.locator("tr[data-target=sm-a] .sync")).to_have_text("in sync")
    expect(targets.locator("tr[data-target=sm-b] .sync")).to_have_text("never reported")
    expect(card(page, "roce-west").locator(".no-targets")).to_be_visible()
    expect(card(page, "roce-west").locator(".untargeted .leaf")).to_have_text(["leaf01", "leaf02"])
    expect(card(page, "ib-east").locator(".untargeted")).to_have_count(0)
    screenshot(page, "fabrics-deploy-targets")


def test_leaves_that_carry_tenants_ports_without_a_target_are_named(site: ConsoleSite):
    uow = site.uow()
    deploy.put_target(uow, fabric_name="roce-west", name="leaf01", spec=TargetCreate(kind="sonic"))
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        html = client.get("/ui/fabrics").text

    roce = html[html.index('data-fabric="roce-west"') :]
    assert 'data-target="leaf01"' in roce
    assert '<span class="leaf" data-leaf="leaf02">leaf02</span>' in roce
    assert 'data-leaf="leaf01"' not in html and html.count('class="untargeted"') == 1


@pytest.mark.parametrize(
    ("holds", "counterexamples", "alarm", "text", "badge"),
    [
        (True, 0, False, "isolation holds", "badge-ok"),
        (False, 3, False, "violated: 3 counterexamples", "badge-bad"),
        (False, 1, False, "violated: 1 counterexample", "badge-bad"),
        (False, None, True, "violated; the last full check raised an alarm", "badge-bad"),
        (None, None, False, "not verified yet", "badge"),
    ],
)
def test_the_verdict_as_the_overview_states_it(holds, counterexamples, alarm, text, badge):
    fabric = FabricState("f", "infiniband", holds, counterexamples, alarm, (), {}, ())
    verdict = verdict_of(fabric)
    assert (verdict.text, verdict.badge) == (text, badge)


def test_pool_bars_warn_when_nearly_full_and_stay_visible_when_barely_used():
    assert pool_row(PoolUse("pkey", 4, 32511))["width"] == 0.6
    assert pool_row(PoolUse("pkey", 4, 32511))["percent"] == "<0.1%"
    assert pool_row(PoolUse("vlan", 0, 100))["width"] == 0
    assert pool_row(PoolUse("vlan", 80, 100))["level"] == "high"
    assert pool_row(PoolUse("vlan", 95, 100))["level"] == "full"
    assert pool_row(PoolUse("vlan", 100, 100))["width"] == 100


def test_durations_read_as_people_say_them():
    assert [human_duration(s) for s in (5, 90, 7200, 200000)] == ["5 s", "1 min", "2 h", "2 d"]
