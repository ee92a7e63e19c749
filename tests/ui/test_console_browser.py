"""The console in a real browser (chromium, headless): sign-in, the layout, sign-out.

Every test's page is guarded (tests/ui/browser.py): a console error, a failed request or a
request to another origin fails it.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.ui.browser import screenshot


def test_signing_in_shows_the_console_and_signing_out_ends_the_session(page: Page, sign_in):
    page.goto("/ui/fabrics")
    expect(page).to_have_url("/ui/sign-in?reason=required&next=%2Fui%2Ffabrics")
    screenshot(page, "sign-in")
    sign_in(page, "operator")
    expect(page).to_have_url("/ui/fabrics")
    expect(page.locator(".who-role")).to_have_text("operator")
    nav = page.locator("nav.nav a")
    expect(nav).to_have_text(["Fabrics", "Tenants", "Evidence", "Audit log"])
    expect(page.locator("nav.nav a[aria-current=page]")).to_have_text("Fabrics")
    page.click("text=Sign out")
    expect(page).to_have_url("/ui/sign-in?reason=signed-out")
    expect(page.locator(".flash")).to_have_text("You are signed out.")
    page.goto("/ui/fabrics")  # the cookie is gone: back to the sign-in page
    expect(page).to_have_url("/ui/sign-in?reason=required&next=%2Fui%2Ffabrics")


def test_the_session_cookie_is_out_of_reach_of_page_scripts(page: Page, sign_in):
    sign_in(page, "auditor")
    assert page.evaluate("document.cookie") == ""
    cookie = next(c for c in page.context.cookies() if c["name"] == "isofabric_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"


def test_a_wrong_token_is_refused_on_the_form(page: Page, guard):
    guard.tolerate(r"status of 401")  # the refused form's own answer
    page.goto("/ui/sign-in")
    page.fill("#token", "isf_" + "C" * 43)
    page.click("button[type=submit]")
    expect(page.locator(".flash")).to_contain_text("the token is not valid")
    assert all(c["name"] != "isofabric_session" for c in page.context.cookies())
