"""The tenant pages (/ui/tenants, /ui/tenants/{tenant}): the demo's facts, the usage chart, roles.

The demo (tests/demo_db.py): acme (external, gold) holds gpu0001 and gpu0002 on ib-east and on
roce-west, and is granted storage on both. The usage chart is checked on a server whose clock
runs three days ahead of the demo's load, so whole days have exactly 4 nodes x 24 h = 96
node-hours of gold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from api.ui.usage_chart import chart_data, usage_window
from tenancy.usecases import proofs
from tests.live_server import live_server
from tests.ui.browser import screenshot
from tests.ui.conftest import LiveConsole
from tests.ui.console_site import ConsoleSite
from tests.ui.test_console_session import sign_in as client_sign_in

AHEAD = timedelta(days=3)


@pytest.fixture
def console_ahead(site: ConsoleSite) -> Iterator[LiveConsole]:
    """A live server of its own on `site`, its clock three days ahead."""
    with live_server(site.app(clock=lambda: datetime.now(UTC) + AHEAD)) as url:
        yield LiveConsole(url, site)


def signed_in(site: ConsoleSite, role: str) -> TestClient:
    client = TestClient(site.app(), follow_redirects=False)
    client_sign_in(client, site.tokens[role])
    return client


def usage_json(page: Page) -> dict[str, Any]:
    text = page.locator("script#usage-data").text_content()
    assert text is not None
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def test_acmes_page_shows_its_nodes_grant_reachability_and_usage_chart(
    console_ahead: LiveConsole, page_on, sign_in
):
    page = page_on(console_ahead)
    sign_in(page, "auditor", console_ahead.site)
    page.goto("/ui/tenants/acme")
    expect(page.locator("h1")).to_have_text("Tenant acme")
    expect(page.locator(".tenant-header .qos")).to_have_text("QoS gold")
    expect(page.locator(".qos-facts")).to_contain_text("InfiniBand SL 3")
    expect(page.locator(".qos-facts")).to_contain_text("RoCE DSCP 26, traffic class 3, lossless")
    for fabric in ("ib-east", "roce-west"):
        nodes = page.locator(f".fabric-nodes[data-fabric='{fabric}'] .node")
        expect(nodes).to_have_text(["gpu0001", "gpu0002"])
        grant = page.locator(f"tr.grant[data-fabric='{fabric}'][data-service=storage]")
        expect(grant).to_have_count(1)
        edge = page.locator(f".fabric-reach[data-fabric='{fabric}'] tr.edge")
        expect(edge).to_have_attribute("data-owner", "service:storage")
        expect(edge.locator(".badge")).to_have_text("allowed")
    expect(page.locator(".fabric-nodes[data-fabric='ib-east'] .segment")).to_have_text(
        "Segment: P_Key 0x0101"
    )
    expect(page.locator("canvas#usage-chart")).to_be_visible()
    page.wait_for_function("() => window.Chart && Chart.getChart('usage-chart')")

    data = usage_json(page)
    (gold,) = data["series"]
    assert gold["qos_class"] == "gold" and data["unit"] == "node-hours"
    hours = gold["node_hours"]
    assert len(hours) == len(data["labels"]) == 30
    first = next(i for i, h in enumerate(hours) if h > 0)  # the day the demo was loaded
    assert all(h == 0 for h in hours[:first])
    whole_days = hours[first + 1 : -1]  # between the load day and today (both partial)
    assert len(whole_days) >= 2 and all(h == 96.0 for h in whole_days)
    drawn = page.evaluate(
        "() => { const c = Chart.getChart('usage-chart');"
        " return {labels: c.data.labels, sets: c.data.datasets.map(d => [d.label, d.data])}; }"
    )
    assert drawn == {"labels": data["labels"], "sets": [["gold", hours]]}
    expect(page.locator(".actions")).to_have_count(0)  # the auditor reads, never acts
    expect(page.locator("a.revoke")).to_have_count(0)
    screenshot(page, "tenant")


def test_the_tenants_list_as_the_auditor_and_as_billing(site: ConsoleSite):
    with signed_in(site, "auditor") as client:
        html = client.get("/ui/tenants").text
    for name in ("acme", "globex", "research"):
        assert f'data-tenant="{name}"' in html
    assert "<th>QoS class</th>" in html
    assert 'data-action="onboard"' not in html
    with signed_in(site, "billing") as client:
        listed = client.get("/ui/tenants").text
        page = client.get("/ui/tenants/acme")
    assert "<th>QoS class</th>" not in listed and "<th>Billing account</th>" in listed
    assert page.status_code == 200
    # Billing sees what the API shows it: name, billing account, and usage; no holdings.
    assert 'id="usage-data"' in page.text
    for hidden in ("Nodes and segments", "Shared services", "Reachability", "QoS gold"):
        assert hidden not in page.text
    assert "footprint-map" not in page.text  # billing may not open the map either


def test_a_tenant_viewer_sees_its_own_tenant_only(site: ConsoleSite):
    with signed_in(site, "acme-viewer") as client:
        home = client.get("/ui")
        own = client.get("/ui/tenants/acme")
        other = client.get("/ui/tenants/globex")
        listing = client.get("/ui/tenants")
    assert home.headers["location"] == "/ui/tenants/acme"
    assert own.status_code == 200 and "gpu0001" in own.text
    assert other.status_code == 404 and "globex" not in other.text.split("<main")[0]
    assert listing.status_code == 403
    # GET /v1/usage/records is no tenant role's: the page has no usage either.
    assert 'id="usage-data"' not in own.text
    assert 'data-action="allocate"' not in own.text


def test_a_tenant_viewer_in_the_browser_lands_on_its_tenant(page: Page, sign_in, guard):
    guard.tolerate(r"status of 404")
    sign_in(page, "acme-viewer")
    expect(page).to_have_url("/ui/tenants/acme")
    expect(page.locator("nav.nav a")).to_have_text(["My tenant", "Evidence"])
    expect(page.locator(".fabric-nodes")).to_have_count(2)
    # Each fabric links to the tenant's footprint map there; follow ib-east's.
    for fabric in ("ib-east", "roce-west"):
        link = page.locator(f".fabric-nodes[data-fabric='{fabric}'] a.footprint-map")
        expect(link).to_have_attribute("href", f"/ui/tenants/acme/fabrics/{fabric}/map")
    page.locator(".fabric-nodes[data-fabric='ib-east'] a.footprint-map").click()
    expect(page).to_have_url("/ui/tenants/acme/fabrics/ib-east/map")
    expect(page.locator("h1")).to_have_text("acme on ib-east")
    expect(page.locator(".footprint")).to_have_text("4 ports on 2 leaves · acme")
    page.goto("/ui/tenants/globex")
    expect(page.locator("h1")).to_have_text("404 · Resource not found")


def test_an_unknown_tenant_is_a_404_page(site: ConsoleSite):
    with signed_in(site, "operator") as client:
        answer = client.get("/ui/tenants/nosuch")
    assert answer.status_code == 404
    assert "tenant &#39;nosuch&#39;" in answer.text  # the use case's detail, escaped


def test_the_chart_sums_node_hours_per_day_and_class_and_ignores_service_access():
    labels = ["2026-03-01", "2026-03-02"]

    def record(day: str, qos: str, hours: str, kind: str = "fabric-capacity") -> dict[str, Any]:
        return {
            "resource_type": kind,
            "period_start": f"{day}T00:00:00Z",
            "qos_class": qos,
            "node_hours": hours,
        }

    records = [
        record("2026-03-01", "gold", "24.000000"),
        record("2026-03-01", "gold", "0.333333"),  # another fabric, same day and class
        record("2026-03-02", "bronze", "12.5"),
        record("2026-03-02", "gold", "7", kind="service-access"),
    ]
    assert chart_data(records, labels) == {
        "unit": "node-hours",
        "labels": labels,
        "series": [
            {"qos_class": "bronze", "node_hours": [0.0, 12.5]},
            {"qos_class": "gold", "node_hours": [24.33, 0.0]},
        ],
    }


def test_the_window_is_thirty_utc_days_ending_today():
    start, labels = usage_window(datetime(2026, 3, 30, 17, 5, tzinfo=UTC))
    assert start == datetime(2026, 3, 1, tzinfo=UTC)
    assert labels[0] == "2026-03-01" and labels[-1] == "2026-03-30" and len(labels) == 30


def test_proofs_link_to_their_evidence_pages_and_a_tenant_role_lists_tenant_views_only(
    site: ConsoleSite,
):
    uow = site.uow()
    full = proofs.issue(uow, tenant_name="acme", fabric_name="ib-east")
    mine = proofs.issue(uow, tenant_name="acme", fabric_name="roce-west", view="tenant")
    with signed_in(site, "auditor") as client:
        audited = client.get("/ui/tenants/acme").text
    with signed_in(site, "acme-viewer") as client:
        own = client.get("/ui/tenants/acme").text
    for proof in (full, mine):
        assert f'href="/ui/evidence/proofs/{proof.id}"' in audited
    assert f'href="/ui/evidence/proofs/{mine.id}"' in own
    assert full.id not in own  # GET /v1/proofs gives a tenant role its tenant views only


def test_the_partitions_section_lists_the_default_partition_with_its_ports(site: ConsoleSite):
    client = signed_in(site, "auditor")

    html = client.get("/ui/tenants/acme").text

    row = html.split('<tr class="partition" data-fabric="ib-east" data-name="default">')[1]
    row = row.split("</tr>")[0]
    assert "<code>0x0101</code>" in row and "<td>gold</td>" in row and "<td>ipoib</td>" in row
    assert "<td>4</td>" in row  # gpu0001 and gpu0002, two ports each
    assert (
        'data-fabric="roce-west"'
        not in html.split('class="card partitions"')[1].split("</section>")[0]
    )
