"""Operator actions in the console: what-if first, then the same use case as the API, PRG.

Browser tests change state, so each runs on a live server of its own (`fresh_console` on the
test's `site`), never on the shared `console`. The isolation-breaking allocation uses a fabric
`ib-tight` built from the demo topology with 2 P_Keys per port: a tenant granted storage there
needs 3 keys on each port (default, its own, storage's), which the verifier refutes.
"""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from cli import DEMO_TOPOLOGY
from tenancy.record import audit_log
from tenancy.schemas import GrantCreate, NodePatch, ServiceCreate, TenantCreate
from tenancy.usecases import allocations, nodes, shared_services, tenants
from tests.builders import dump_database, uow_create_fabric
from tests.ui.browser import screenshot
from tests.ui.console_site import ConsoleSite
from tests.ui.test_console_session import csrf_of
from tests.ui.test_console_session import sign_in as client_sign_in

ACTION_PAGES = [
    ("GET", "/ui/actions/onboard"),
    ("GET", "/ui/actions/onboard/confirm?name=hooli&kind=external"),
    ("POST", "/ui/actions/onboard"),
    ("GET", "/ui/tenants/acme/actions/allocate"),
    ("GET", "/ui/tenants/acme/actions/allocate/confirm?fabric=ib-east&count=1"),
    ("POST", "/ui/tenants/acme/actions/allocate"),
    ("GET", "/ui/tenants/acme/actions/grant"),
    ("POST", "/ui/tenants/acme/actions/grant"),
    ("GET", "/ui/tenants/acme/actions/offboard"),
    ("POST", "/ui/tenants/acme/actions/offboard"),
]


def signed_in(site: ConsoleSite, role: str) -> TestClient:
    client = TestClient(site.app(), follow_redirects=False)
    client_sign_in(client, site.tokens[role])
    return client


def tight_fabric(site: ConsoleSite) -> None:
    """ib-tight (2 P_Keys per port) with storage on stor01, and hooli granted it, no nodes."""
    uow = site.uow()
    uow_create_fabric(uow, "ib-tight", topology_text=DEMO_TOPOLOGY.read_text(), pkeys_per_port=2)
    storage = NodePatch(role="storage")
    nodes.set_node_role(uow, fabric_name="ib-tight", node_name="stor01", patch=storage)
    shared_services.create_service(
        uow, fabric_name="ib-tight", spec=ServiceCreate(name="storage", nodes=["stor01"])
    )
    tenants.create_tenant(uow, spec=TenantCreate(name="hooli", kind="external"))
    shared_services.grant_service(
        uow, tenant_name="hooli", spec=GrantCreate(fabric="ib-tight", service="storage")
    )


def held_nodes(site: ConsoleSite, tenant: str) -> list[str]:
    page = allocations.list_allocations(
        site.uow(), tenant_name=tenant, limit=100, cursor=None, fabric=None, state="active"
    )
    return sorted(f"{a.fabric}/{n}" for a in page.data for n in a.nodes)


def seen(page: str) -> str:
    """The audit log's length a confirmation page's commit form posts back (SEEN_FIELD)."""
    found = re.search(r'name="seen_log_size" value="(\d+)"', page)
    assert found is not None
    return found.group(1)


def log_size(site: ConsoleSite) -> str:
    with site.uow().transaction(read_only=True) as tx:
        return str(len(audit_log.entries(tx.session)))


def audit_actions(site: ConsoleSite) -> list[tuple[str, str, str]]:
    with site.uow().transaction(read_only=True) as tx:
        return [(e.action, e.target, e.role) for e in audit_log.entries(tx.session)]


def test_an_operator_onboards_and_allocates_through_the_console(
    site: ConsoleSite, fresh_console, page_on, sign_in
):
    page = page_on(fresh_console)
    sign_in(page, "operator", site)
    page.goto("/ui/tenants")
    page.click("a[data-action=onboard]")
    page.fill("#name", "hooli")
    page.select_option("#kind", "external")
    page.select_option("#qos_class", "silver")
    page.click("button[data-what-if]")
    expect(page.locator(".what-if .verdict")).to_have_text("isolation holds")
    page.click("button[data-commit=onboard]")
    expect(page).to_have_url("/ui/tenants/hooli")
    expect(page.locator(".flash")).to_have_text(
        "Tenant hooli onboarded (external, QoS class silver)."
    )

    page.click("a[data-action=allocate]")
    page.select_option("#fabric", "ib-east")
    page.fill("#count", "1")
    page.click("button[data-what-if]")
    what_if = page.locator(".fabric-what-if[data-fabric=ib-east]")
    expect(what_if.locator("h3 .badge")).to_have_text("holds")
    expect(what_if.locator("details.artifact[data-path='opensm/partitions.conf']")).to_be_visible()
    assert held_nodes(site, "hooli") == []  # the what-if wrote nothing
    what_if.locator("details.artifact[data-path='opensm/partitions.conf'] summary").click()
    expect(what_if.locator("pre.diff").first).to_contain_text("+tenant_hooli=")
    screenshot(page, "action-confirm")
    page.click("button[data-commit=allocate]")
    expect(page).to_have_url("/ui/tenants/hooli")
    (held,) = held_nodes(site, "hooli")
    node = held.split("/")[1]
    expect(page.locator(".flash")).to_have_text(f"Allocated {node} to hooli on ib-east.")
    expect(page.locator(".fabric-nodes[data-fabric=ib-east] .node")).to_have_text([node])
    page.reload()
    expect(page.locator(".flash")).to_have_count(0)  # shown once
    entries = audit_actions(site)
    assert ("tenant.create", "tenants/hooli", "operator") in entries
    assert entries[-1][0] == "allocation.create" and entries[-1][2] == "operator"


def test_an_isolation_breaking_allocation_is_refused_with_its_counterexamples(
    site: ConsoleSite, fresh_console, page_on, sign_in
):
    tight_fabric(site)
    page = page_on(fresh_console)
    sign_in(page, "operator", site)
    page.goto("/ui/tenants/hooli/actions/allocate")
    page.select_option("#fabric", "ib-tight")
    page.fill("#count", "1")
    page.click("button[data-what-if]")
    expect(page.locator(".what-if .verdict")).to_have_text("isolation would break")
    rules = page.locator(".fabric-what-if[data-fabric=ib-tight] tr.counterexample")
    expect(rules.first).to_have_attribute("data-rule", "pkey-budget-exceeded")
    expect(rules.first.locator(".message")).to_contain_text("but the fabric allows 2 per port")
    expect(page.locator("button[data-commit]")).to_have_count(0)  # nothing to confirm
    expect(page.locator(".refusal")).to_contain_text("Nothing was written.")
    assert held_nodes(site, "hooli") == []


def test_committing_an_isolation_breaking_allocation_shows_the_refusal_and_writes_nothing(
    site: ConsoleSite,
):
    tight_fabric(site)
    with signed_in(site, "operator") as client:
        token = csrf_of(client)
        before = dump_database(site.engine)
        answer = client.post(
            "/ui/tenants/hooli/actions/allocate",
            data={
                "csrf_token": token,
                "fabric": "ib-tight",
                "count": "1",
                "nodes": "",
                "seen_log_size": log_size(site),
            },
        )
    assert answer.status_code == 409
    assert "Refused: the change would break isolation" in answer.text
    assert "the change would break isolation on fabric &#39;ib-tight&#39;" in answer.text
    assert answer.text.count('data-rule="pkey-budget-exceeded"') == 2  # both ports of the node
    assert dump_database(site.engine) == before


def test_the_auditor_cannot_reach_the_action_pages(site: ConsoleSite):
    with signed_in(site, "auditor") as client:
        token = csrf_of(client)
        before = dump_database(site.engine)
        for method, path in ACTION_PAGES:
            answer = client.request(method, path, data={"csrf_token": token, "name": "hooli"})
            assert answer.status_code == 403, (method, path)
        revoke = grant_path(site, "acme")
        assert client.get(revoke).status_code == 403
        page = client.get("/ui/tenants/acme").text
        listing = client.get("/ui/tenants").text
    assert dump_database(site.engine) == before
    assert "data-action=" not in page and "/actions/" not in page
    assert "data-action=" not in listing and "/actions/" not in listing


def test_the_auditor_sees_no_action_button_and_gets_a_403_page(page: Page, sign_in, guard):
    guard.tolerate(r"status of 403")
    sign_in(page, "auditor")
    page.goto("/ui/tenants/acme")
    expect(page.locator(".fabric-nodes")).to_have_count(2)
    expect(page.locator("[data-action], a.revoke")).to_have_count(0)
    page.goto("/ui/tenants")
    expect(page.locator("tr[data-tenant]")).to_have_count(3)
    expect(page.locator("[data-action]")).to_have_count(0)
    answer = page.goto("/ui/tenants/acme/actions/allocate")
    assert answer is not None and answer.status == 403
    expect(page.locator("h1")).to_have_text(re.compile(r"^403 · "))


def test_tenant_roles_get_a_403_on_their_own_actions_and_a_404_on_others(site: ConsoleSite):
    with signed_in(site, "acme-admin") as client:
        own = client.get("/ui/tenants/acme/actions/offboard")
        other = client.get("/ui/tenants/globex/actions/offboard")
        onboard = client.get("/ui/actions/onboard")
    assert own.status_code == 403
    assert other.status_code == 404
    assert onboard.status_code == 403


@pytest.mark.parametrize("token", [None, "0" * 64])
def test_a_post_without_the_right_csrf_token_is_refused_and_changes_nothing(
    site: ConsoleSite, token: str | None
):
    form = {"name": "hooli", "kind": "external", "fabric": "ib-east", "count": "1"}
    if token is not None:
        form["csrf_token"] = token
    with signed_in(site, "operator") as client:
        before = dump_database(site.engine)
        for path in (
            "/ui/actions/onboard",
            "/ui/tenants/acme/actions/allocate",
            "/ui/tenants/acme/actions/offboard",
            grant_path(site, "acme"),
        ):
            answer = client.post(path, data=form)
            assert answer.status_code == 403, path
            assert "CSRF token is missing or wrong" in answer.text
    assert dump_database(site.engine) == before


def grant_path(site: ConsoleSite, tenant: str, fabric: str = "ib-east") -> str:
    page = shared_services.list_grants(
        site.uow(), tenant_name=tenant, limit=100, cursor=None, state="active"
    )
    grant = next(g for g in page.data if g.fabric == fabric)
    return f"/ui/tenants/{tenant}/actions/revoke/{grant.id}"


def test_revoke_shows_the_removed_edge_then_revokes(site: ConsoleSite):
    path = grant_path(site, "acme")
    with signed_in(site, "operator") as client:
        confirm = client.get(path)
        assert confirm.status_code == 200
        assert re.search(
            r'class="edge-removed">.*?tenant:acme</td><td>service:storage', confirm.text, re.S
        )
        form = {"csrf_token": csrf_of(client), "seen_log_size": seen(confirm.text)}
        done = client.post(path, data=form)
        assert done.status_code == 303 and done.headers["location"] == "/ui/tenants/acme"
        page = client.get("/ui/tenants/acme").text
    assert "Revoked acme&#39;s grant of storage on ib-east." in page
    assert page.count('class="grant"') == 1  # roce-west's grant stays
    assert audit_actions(site)[-1] == (
        "grant.delete",
        f"tenants/acme/grants/{path[-36:]}",
        "operator",
    )


def test_grant_and_offboard_through_the_console(site: ConsoleSite):
    with signed_in(site, "operator") as client:
        token = csrf_of(client)
        form = client.get("/ui/tenants/globex/actions/grant").text
        assert '<option value="storage">' in form
        confirm = client.get(
            "/ui/tenants/globex/actions/grant/confirm",
            params={"fabric": "ib-east", "service": "storage"},
        )
        assert "tenant:globex</td><td>service:storage" in confirm.text
        granted = client.post(
            "/ui/tenants/globex/actions/grant",
            data={
                "csrf_token": token,
                "fabric": "ib-east",
                "service": "storage",
                "seen_log_size": seen(confirm.text),
            },
        )
        assert granted.status_code == 303
        offboard = client.get("/ui/tenants/globex/actions/offboard")
        assert 'data-commit="offboard"' in offboard.text
        assert 'class="edge-removed"' in offboard.text
        posted = {"csrf_token": token, "seen_log_size": seen(offboard.text)}
        gone = client.post("/ui/tenants/globex/actions/offboard", data=posted)
        assert gone.status_code == 303
        page = client.get("/ui/tenants/globex").text
    assert "Tenant globex offboarded" in page
    assert tenants.get_tenant(site.uow(), name="globex").status == "offboarded"
    assert 'data-action="allocate"' not in page  # an offboarded tenant has no actions
    done = [action for action, _target, _role in audit_actions(site)]
    assert "grant.create" in done and done[-1] == "tenant.offboard"


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/ui/actions/onboard/confirm?name=acme&kind=external", 409, "acme"),
        ("/ui/actions/onboard/confirm?name=Bad_Name&kind=external", 422, "name"),
        ("/ui/tenants/acme/actions/allocate/confirm?fabric=ib-east&count=lots", 422, "count"),
        ("/ui/tenants/acme/actions/allocate/confirm?fabric=nosuch&count=1", 404, "nosuch"),
        ("/ui/tenants/acme/actions/revoke/not-a-grant", 404, "not-a-grant"),
    ],
)
def test_bad_input_is_a_clear_error_page_and_writes_nothing(
    site: ConsoleSite, path: str, status: int, says: str
):
    with signed_in(site, "operator") as client:
        before = dump_database(site.engine)
        answer = client.get(path)
    assert answer.status_code == status
    assert says in answer.text.split('class="detail">')[1]
    assert dump_database(site.engine) == before
