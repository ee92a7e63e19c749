"""The fabric map: the demo's leaves by rail with acme's ports highlighted in chromium, the
aggregate view of a large fabric with its drill-downs, and rails from HCA names.

The demo's ib-east cables HCA mlx5_0 of every host to leaf01 and mlx5_1 to leaf02 (rails 0 and
1); acme holds gpu0001 and gpu0002, so 4 ports; roce-west has NICs eth0 / eth1 on its leaves.
"""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from api.ui import fabric_map_view as fv
from api.ui.pages.fabric_map import NO_RAIL, detail_leaves, map_context
from tenancy.schemas import AllocationCreate, FabricCreate, PKeyRange
from tenancy.usecases.allocations import allocate
from tenancy.usecases.fabric_map import FREE, FabricLayout, LeafUse, PortUse, hca_index
from tenancy.usecases.fabrics import create_fabric
from tenancy.usecases.topology import import_topology
from tests.benchmarks.bench_scale import HCAS, LEAF_PORTS, ibnetdiscover_text
from tests.ui.browser import screenshot
from tests.ui.console_site import ConsoleSite
from tests.ui.test_console_session import sign_in as client_sign_in


def test_the_map_highlights_acmes_ports_on_leaves_grouped_by_rail(page: Page, sign_in):
    sign_in(page, "auditor")
    page.goto("/ui/fabrics/ib-east/map?tenant=acme")
    expect(page.locator("h1")).to_have_text("Fabric map · ib-east")
    expect(page.locator(".footprint")).to_have_text("acme: 4 ports on 2 leaves")
    expect(page.locator("section.rail-detail h2")).to_have_text(
        ["rail 0 (mlx5_0 / NIC 0)", "rail 1 (mlx5_1 / NIC 1)"]
    )
    expect(page.locator("section.rail-detail[data-rail='0'] figure.leaf")).to_have_attribute(
        "data-leaf", "leaf01"
    )
    highlighted = page.locator("rect.port.hl")
    expect(highlighted).to_have_count(4)
    for i in range(4):
        expect(highlighted.nth(i)).to_have_attribute("data-owner", "tenant:acme")
    nodes = {highlighted.nth(i).get_attribute("data-node") for i in range(4)}
    assert nodes == {"gpu0001", "gpu0002"}
    expect(page.locator("rect.port.dim[data-owner='tenant:acme']")).to_have_count(0)
    expect(page.locator("rect.port.dim[data-owner='tenant:globex']")).to_have_count(4)
    expect(page.locator("rect.port[data-owner='service:storage']")).to_have_count(2)
    expect(page.locator("ul.switch-list li")).to_have_text(["spine01", "spine02"])
    legend = page.locator("ul.legend.owners li[data-owner='tenant:acme']")
    expect(legend).to_contain_text("tenant:acme 4")
    # the owner colour is a class (CSP: no inline style), the same on the map and the legend
    colour = legend.locator(".swatch").get_attribute("class")
    square = highlighted.first.get_attribute("class") or ""
    assert colour is not None and colour.split()[-1] in square.split()
    screenshot(page, "fabric-map")


def test_the_roce_map_shows_the_nics_by_leaf(page: Page, sign_in):
    sign_in(page, "operator")
    page.goto("/ui/fabrics/roce-west/map?tenant=acme")
    expect(page.locator("rect.port.hl")).to_have_count(4)  # 2 nodes x 2 NICs
    expect(page.locator("figure.leaf")).to_have_count(2)
    expect(page.locator(".kind")).to_have_text("RoCE")


def test_without_a_filter_nothing_is_dimmed_and_an_unknown_tenant_holds_nothing(
    site: ConsoleSite,
):
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        plain = client.get("/ui/fabrics/ib-east/map")
        nobody = client.get("/ui/fabrics/ib-east/map?tenant=nobody")
        missing = client.get("/ui/fabrics/nope/map")
    assert plain.status_code == 200 and " dim" not in plain.text and "footprint" not in plain.text
    assert plain.text.count('class="port ') == 19  # every host port of the demo's ib-east
    assert "nobody</strong>: 0 ports on 0 leaves" in nobody.text
    assert nobody.text.count('class="port ') == 19 and nobody.text.count(" hl") == 0
    assert missing.status_code == 404


def test_rails_come_from_the_hca_index():
    assert [hca_index(n) for n in ("mlx5_3", "eth1", "mlx5_10", "ib")] == [3, 1, 10, None]
    mixed = LeafUse("leaf", (("mlx5_0", FREE, 3), ("mlx5_1", FREE, 5), ("mlx5_1", "t", 1)))
    assert mixed.rail == 1  # most ports
    assert LeafUse("leaf", (("ib", FREE, 2),)).rail is None
    assert mixed.by_owner() == {FREE: 8, "t": 1}


def large_layout(leaves_per_rail: int = 100) -> FabricLayout:
    """Two rails of leaves; tenant:a on every tenth leaf of rail 0, storage on the last leaf."""
    leaves = []
    for rail in range(2):
        for i in range(leaves_per_rail):
            owner = "tenant:a" if rail == 0 and i % 10 == 0 else "tenant:b"
            counts = ((f"mlx5_{rail}", owner, 6), (f"mlx5_{rail}", FREE, 2))
            leaves.append(LeafUse(f"leaf-r{rail}-{i:03d}", counts))
    last = LeafUse("leaf-r1-zzz", (("mlx5_1", "service:storage", 4),))
    return FabricLayout("big", "infiniband", ("spine01",), (*leaves, last))


def test_a_large_fabric_is_drawn_one_cell_per_leaf_with_drill_downs():
    layout = large_layout()
    assert len(layout.leaves) > fv.DETAIL_LEAVES
    assert detail_leaves(layout, None, None, 0) == []
    rail1 = detail_leaves(layout, None, 1, 1)
    assert [leaf.leaf for leaf in rail1] == [f"leaf-r1-{i:03d}" for i in range(64, 100)] + [
        "leaf-r1-zzz"
    ]
    assert detail_leaves(layout, None, NO_RAIL, 0) == []
    footprint = detail_leaves(layout, "tenant:a", None, 0)
    assert [leaf.leaf for leaf in footprint] == [f"leaf-r0-{i:03d}" for i in range(0, 100, 10)]
    ports = [PortUse("leaf-r0-000", str(p), f"n{p}", "mlx5_0", "tenant:a") for p in range(6)]
    context = map_context(layout, ports, footprint, "tenant:a", None, 0)
    assert context["large"] and context["tenant_ports"] == 60 and context["tenant_leaves"] == 10
    rails = {r["rail"]: r for r in context["overview"]}
    assert sorted(rails) == [0, 1] and rails[1]["count"] == 101
    cells = rails[0]["grid"]["cells"]
    assert len(cells) == 100
    assert [c["mark"] for c in cells[:2]] == ["hl", "dim"]
    assert cells[0]["title"].startswith("leaf-r0-000: 8 host ports; tenant:a 6, free 2")
    assert cells[1]["css"] == fv.Colours.of(["tenant:a", "tenant:b"]).css("tenant:b")
    assert rails[1]["grid"]["cells"][-1]["css"] == "own-svc"
    drawn = [leaf["leaf"] for g in context["groups"] for leaf in g["leaves"]]
    assert drawn == [f"leaf-r0-{i:03d}" for i in range(0, 100, 10)]
    assert context["groups"][0]["leaves"][0]["held"] == 6


def test_many_tenants_share_twelve_stable_colour_classes():
    few = fv.Colours.of(["tenant:b", "tenant:a", FREE, "service:s"])
    assert [few.css(o) for o in ("tenant:a", "tenant:b", FREE, "service:s")] == [
        "own-0", "own-1", "own-free", "own-svc",
    ]  # fmt: skip
    many = [f"tenant:t{i}" for i in range(2000)]
    colours = fv.Colours.of(many)
    assert {colours.css(o) for o in many} == {f"own-{i}" for i in range(fv.PALETTE)}
    assert colours.css("tenant:t7") == fv.Colours.of(reversed(many)).css("tenant:t7")
    legend = fv.legend(dict.fromkeys(many, 1) | {FREE: 5000}, colours)
    assert len(legend["owners"]) == fv.LEGEND_LIMIT and legend["hidden"] == 2001 - 24
    assert legend["owners"][0]["owner"] == "tenant:t0" and FREE not in [
        e["owner"] for e in legend["owners"]
    ]


def test_a_tenant_viewer_sees_its_own_footprint_and_nothing_else(page: Page, sign_in, guard):
    sign_in(page, "acme-viewer")
    page.goto("/ui/tenants/acme/fabrics/ib-east/map")
    expect(page.locator(".footprint")).to_have_text("4 ports on 2 leaves · acme")
    squares = page.locator("rect.port")
    expect(squares).to_have_count(4)
    for i in range(4):
        expect(squares.nth(i)).to_have_attribute("data-owner", "tenant:acme")
    expect(page.locator("figure.leaf")).to_have_count(2)
    assert "globex" not in page.content() and "gpu0005" not in page.content()
    screenshot(page, "tenant-map")
    guard.tolerate(r"status of 404")
    answer = page.goto("/ui/tenants/globex/fabrics/ib-east/map")
    assert answer is not None and answer.status == 404
    assert "gpu0005" not in page.content()


def test_the_footprint_page_follows_the_tenant_pages_rules(site: ConsoleSite):
    def status(role: str, path: str) -> int:
        with TestClient(site.app(), follow_redirects=False) as client:
            client_sign_in(client, site.tokens[role])
            return client.get(path).status_code

    acme = "/ui/tenants/acme/fabrics/roce-west/map"
    assert status("acme-admin", acme) == 200
    assert status("auditor", acme) == 200
    assert status("billing", acme) == 403
    assert status("acme-admin", "/ui/tenants/research/fabrics/roce-west/map") == 404
    assert status("operator", "/ui/tenants/nobody/fabrics/roce-west/map") == 404
    assert status("operator", "/ui/tenants/acme/fabrics/nope/map") == 404


def test_the_map_follows_each_committed_change(site: ConsoleSite):
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        before = client.get("/ui/fabrics/ib-east/map?tenant=acme").text
        spec = AllocationCreate(fabric="ib-east", nodes=["gpu0007"])
        allocate(site.uow(), tenant_name="acme", spec=spec)
        after = client.get("/ui/fabrics/ib-east/map?tenant=acme").text
    assert "acme</strong>: 4 ports on 2 leaves" in before
    assert "acme</strong>: 6 ports on 2 leaves" in after
    assert after.count('data-owner="tenant:acme" data-node="gpu0007"') == 2


def test_a_fabric_of_72_leaves_is_served_one_cell_per_leaf_with_its_drill_downs(
    site: ConsoleSite,
):
    uow = site.uow()
    pkeys = PKeyRange(first="0x0100", last="0x7ffe")
    create_fabric(uow, spec=FabricCreate(name="wide", kind="infiniband", pkey_range=pkeys))
    text = ibnetdiscover_text(9 * LEAF_PORTS, HCAS)  # 9 leaves per rail, 8 rails
    import_topology(uow, fabric_name="wide", text=text)
    allocate(uow, tenant_name="acme", spec=AllocationCreate(fabric="wide", nodes=["gpu00040"]))
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        overview = client.get("/ui/fabrics/wide/map").text
        rail = client.get("/ui/fabrics/wide/map?rail=3").text
        acme = client.get("/ui/fabrics/wide/map?tenant=acme").text
    assert overview.count('<rect class="leaf-cell') == 72
    assert overview.count('class="rail" data-rail=') == 8 and 'class="port ' not in overview
    assert 'href="/ui/fabrics/wide/map?rail=3&amp;tenant="' in overview
    assert rail.count('<figure class="leaf"') == 9 and rail.count('class="port ') == 9 * 32
    assert 'data-leaf="leaf-r3-008"' in rail and "page 1 of 1" in rail
    # acme's one node: one port on a leaf of each rail, its 8 leaves outlined and drawn
    assert acme.count('<rect class="leaf-cell') == 72
    assert acme.count(' hl" data-leaf=') == 8 and acme.count('<figure class="leaf"') == 8
    assert acme.count('class="port own-0 hl" data-owner="tenant:acme" data-node="gpu00040"') == 8
    assert "acme</strong>: 8 ports on 8 leaves" in acme


def test_the_sm_hosts_ports_are_management_not_free_on_the_map_and_the_overview(
    site: ConsoleSite,
):
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        drawn = client.get("/ui/fabrics/ib-east/map").text
        overview = client.get("/ui/fabrics").text
    squares = re.findall(
        r'<rect class="port ([^" ]+)[^"]*" data-owner="([^"]+)" data-node="sm01"', drawn
    )
    assert squares and all(owner == "management" and css == "own-mgmt" for css, owner in squares)
    assert re.search(r'data-state="management">.*?<strong class="count">1</strong>', overview)
