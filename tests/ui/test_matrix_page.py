"""The isolation matrix: the demo's facts in chromium, the click-through to a counterexample,
paging at many owners, and the roles refused it.

The demo (tests/demo_db.py): tenants acme, research and globex on ib-east and roce-west, the
storage service granted to acme (P_Key 0x0100 on ib-east, L3 VNI 50000 on roce-west).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Browser, Page, expect

from api.ui import isolation_matrix as mx
from policies.model import Owner
from policies.verdict import Counterexample, Endpoint, ReachabilityEdge, Rule, Verdict
from tenancy import technology
from tenancy.record.snapshot import Snapshot
from tenancy.schemas import VerificationView
from tests.live_server import live_server
from tests.ui.browser import PageGuard, screenshot
from tests.ui.console_site import ConsoleSite
from tests.ui.test_console_session import sign_in as client_sign_in

ACME, GLOBEX, STORAGE = "tenant:acme", "tenant:globex", "service:storage"


def cell(page: Page, row: str, col: str):
    return page.locator(f"td.mx-cell[data-row='{row}'][data-col='{col}']")


def test_the_matrix_shows_the_demo_facts(page: Page, sign_in):
    page.goto("/ui/fabrics/ib-east/matrix")
    sign_in(page, "auditor")
    expect(page.locator("h1")).to_have_text("Isolation matrix · ib-east")
    expect(page.locator(".verdict")).to_have_text("isolation holds")
    expect(page.locator(".no-violations")).to_be_visible()
    allowed = cell(page, ACME, STORAGE)
    expect(allowed).to_have_attribute("data-status", "allowed")
    expect(allowed).to_have_attribute(
        "title", "tenant:acme ↔ service:storage: allowed and intended, P_Key 0x0100"
    )
    expect(cell(page, STORAGE, ACME)).to_have_attribute("data-status", "allowed")
    blocked = cell(page, ACME, GLOBEX)
    expect(blocked).to_have_attribute("data-status", "blocked")
    expect(blocked).to_have_attribute(
        "title", "tenant:acme ↔ tenant:globex: blocked: no shared P_Key"
    )
    expect(cell(page, GLOBEX, STORAGE)).to_have_attribute("data-status", "blocked")
    expect(cell(page, ACME, ACME)).to_have_attribute("data-status", "self")
    # owners: three tenants, the service, and the unassigned nodes as one
    expect(page.locator("th.mx-row")).to_have_text(
        ["acme", "globex", "research", "service:storage", "unassigned"]
    )
    expect(page.locator("td.mx-violation")).to_have_count(0)
    screenshot(page, "matrix")


def test_the_roce_matrix_names_the_vni_on_hover(page: Page, sign_in):
    sign_in(page, "operator")
    page.goto("/ui/fabrics/roce-west/matrix")
    expect(cell(page, ACME, STORAGE)).to_have_attribute(
        "title", "tenant:acme ↔ service:storage: allowed and intended, VNI 50000"
    )
    expect(cell(page, ACME, GLOBEX)).to_have_attribute("data-status", "blocked")


def test_the_filter_narrows_both_axes(page: Page, sign_in):
    sign_in(page, "auditor")
    page.goto("/ui/fabrics/ib-east/matrix")
    page.fill("input[name=q]", "acme")
    page.click("form.filter button")
    expect(page).to_have_url("/ui/fabrics/ib-east/matrix?q=acme")
    expect(page.locator("th.mx-row")).to_have_text(["acme"])


@pytest.fixture
def violated(site: ConsoleSite, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The site served with ib-east's verdict showing acme reaching globex through 0x0101.

    The real verdict plus one unintended edge and its counterexample (the builders of
    policies.verdict), as a wrong fabric would report it: the console must link the cell.
    """
    real = technology.verify_snapshot

    def with_violation(snapshot: Snapshot) -> Verdict:
        verdict = real(snapshot)
        if Rule.PKEY_DUPLICATE not in verdict.rules:
            return verdict  # roce-west keeps its real verdict
        acme, globex = Owner.tenant("acme"), Owner.tenant("globex")
        example = Counterexample(
            rule=Rule.CROSS_TENANT,
            message="tenant:acme reaches tenant:globex through partition 0x0101",
            segment=0x101,
            a=Endpoint(guid=0x100003, node="gpu0001", owner=acme),
            b=Endpoint(guid=0x10000B, node="gpu0005", owner=globex),
        )
        edge = ReachabilityEdge(acme, globex, 0x101, allowed=False)
        return Verdict(
            holds=False,
            snapshot_digest=verdict.snapshot_digest,
            counterexamples=(*verdict.counterexamples, example),
            reachability=(*verdict.reachability, edge),
            rules=verdict.rules,
        )

    monkeypatch.setattr("tenancy.gate.cached_reads.verify_snapshot", with_violation)
    with live_server(site.app()) as url:
        yield url


def test_a_violation_cell_links_to_its_counterexample(
    violated: str, site: ConsoleSite, browser: Browser
):
    guard = PageGuard(violated)
    context = browser.new_context(base_url=violated, viewport={"width": 1360, "height": 900})
    try:
        page = context.new_page()
        guard.attach(page)
        page.goto("/ui/sign-in?next=/ui/fabrics/ib-east/matrix")
        page.fill("#token", site.tokens["auditor"])
        page.click("button[type=submit]")
        expect(page.locator(".verdict")).to_have_text("violated: 1 counterexample")
        expect(page.locator("tr.violation")).to_have_count(1)
        bad = cell(page, ACME, GLOBEX)
        expect(bad).to_have_attribute("data-status", "violation")
        expect(bad).to_have_attribute(
            "title",
            "tenant:acme ↔ tenant:globex: VIOLATION (cross-tenant-reachability), P_Key 0x0101",
        )
        expect(cell(page, ACME, STORAGE)).to_have_attribute("data-status", "allowed")
        screenshot(page, "matrix-violation")
        bad.locator("a").click()
        expect(page).to_have_url("/ui/fabrics/ib-east/counterexamples#cx-0")
        example = page.locator("section#cx-0")
        expect(example).to_have_attribute("data-rule", "cross-tenant-reachability")
        expect(example.locator(".message")).to_have_text(
            "tenant:acme reaches tenant:globex through partition 0x0101"
        )
        expect(example.locator("td.owner")).to_have_text([ACME, GLOBEX])
        screenshot(page, "counterexample")
    finally:
        context.close()
    guard.check()


@pytest.mark.parametrize("page_name", ["matrix", "counterexamples", "map"])
@pytest.mark.parametrize("role", ["acme-viewer", "acme-admin", "billing"])
def test_tenant_roles_and_billing_are_refused_the_fabric_wide_pages(
    site: ConsoleSite, role: str, page_name: str
):
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens[role])
        answer = client.get(f"/ui/fabrics/ib-east/{page_name}")
    assert answer.status_code == 403
    assert "globex" not in answer.text and "research" not in answer.text


def test_an_unknown_fabric_is_a_404_page_and_a_bad_block_a_400(site: ConsoleSite):
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        assert client.get("/ui/fabrics/nope/matrix").status_code == 404
        bad = client.get("/ui/fabrics/ib-east/matrix?rows=x")
        assert bad.status_code == 400
        assert bad.headers["content-type"].startswith("text/html")
        # a block past the end shows the last one
        assert client.get("/ui/fabrics/ib-east/matrix?rows=99&cols=99").status_code == 200


def many_owners(tenants: int) -> VerificationView:
    """A verdict over `tenants` tenants: t000 reaches storage, t001 reaches t119 (a violation)."""
    return VerificationView.model_validate(
        {
            "holds": False,
            "snapshot_digest": "v2:00",
            "counterexamples": [
                {
                    "rule": "cross-tenant-reachability",
                    "message": "t001 reaches t119",
                    "partition": "0x0105",
                    "a": {"guid": "0x01", "node": "n1", "owner": "tenant:t001"},
                    "b": {"guid": "0x02", "node": "n2", "owner": f"tenant:t{tenants - 1:03d}"},
                }
            ],
            "reachability": [
                {"from": "tenant:t000", "to": STORAGE, "segment": "0x0100", "allowed": True},
                {"from": "unassigned:n9", "to": STORAGE, "segment": "0x0100", "allowed": False},
            ],
            "rules": ["cross-tenant-reachability"],
        }
    )


def test_a_large_matrix_is_paged_by_blocks_with_the_worst_cell_of_each():
    relation = mx.Relation(many_owners(120), "big")
    owners = [f"tenant:t{i:03d}" for i in range(120)]
    axis = mx.axis(relation, owners, "")
    assert len(axis) == 122 and axis[-2:] == [STORAGE, "unassigned"]
    assert mx.blocks(len(axis)) == 3
    overview = mx.block_overview(relation, axis)
    assert overview[0][2] == overview[2][0] == "violation"  # t001 (block 0), t119 (block 2)
    assert overview[2][2] == "violation"  # unassigned:n9 -> storage, both in block 2
    assert overview[0][1] == "blocked"
    cells = mx.page_cells(relation, axis[:50], axis[100:], "P_Key")
    t001_t119 = cells[1][19]
    assert (t001_t119.row, t001_t119.col) == ("tenant:t001", "tenant:t119")
    assert t001_t119.status == "violation"
    assert t001_t119.href == "/ui/fabrics/big/counterexamples#cx-0"
    assert cells[0][20].status == "allowed"  # t000 -> storage
    unassigned = mx.page_cells(relation, ["unassigned"], [STORAGE], "P_Key")[0][0]
    assert unassigned.status == "violation"
    assert unassigned.href == "/ui/fabrics/big/counterexamples"  # no counterexample: the list
    assert mx.axis(relation, owners, "T11") == [f"tenant:t11{i}" for i in range(10)]
    assert [(a, b) for a, b, _ in mx.violation_pairs(relation)] == [
        ("tenant:t001", "tenant:t119"),
        (STORAGE, "unassigned"),
    ]


def test_the_block_overview_links_every_block_pair_and_marks_the_current_one():
    grid = [["blocked", "violation"], ["violation", "allowed"]]
    html = str(mx.overview_markup(grid, "/ui/fabrics/big/matrix", "a&b", (1, 0)))
    assert html.count("<td ") == 4
    link = '<a href="/ui/fabrics/big/matrix?q=a%26b&amp;rows={}&amp;cols={}"'
    assert '<td class="mx-violation current">' + link.format(1, 0) in html
    assert 'title="owners 51-100 x 1-50: violation"' in html
    assert '<td class="mx-allowed">' + link.format(1, 1) in html
