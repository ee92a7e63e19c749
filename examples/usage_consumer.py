"""Pull isofabric's usage events (CloudEvents) with the cursor and total them per billing account.

    python examples/usage_consumer.py --url http://127.0.0.1:8000 --token TOKEN --state usage.json

Needs a token of the billing, auditor or operator role; only the standard library.

Delivery guarantee: the state file holds the cursor *and* the totals, written together, atomically
(temporary file + os.replace), only after a whole page has been processed. A crash before that
write leaves the previous cursor and totals in place, so the page is fetched and applied again from
the same starting point: the totals count every event exactly once, across any number of restarts.
The server orders events by (period_start, id) and only publishes final hours, so nothing can
appear behind the cursor. If you forward events to another system instead, you get at-least-once
delivery: de-duplicate there by the CloudEvent `id` (deterministic per record), as Lago's
`transaction_id` or Stripe's `identifier` do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

Page = dict[str, Any]
FetchPage = Callable[[str | None], Page]
QUANTITIES = ("node_seconds", "port_seconds", "access_seconds")


def load_state(path: Path) -> dict[str, Any]:
    """The saved cursor and totals; a fresh state if the file does not exist yet."""
    if not path.exists():
        return {"cursor": None, "totals": {}, "events": 0}
    state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return state


def save_state(path: Path, state: dict[str, Any]) -> None:
    """Replace the state file atomically: readers see the old or the new state, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=2, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def apply_event(totals: dict[str, dict[str, int]], event: dict[str, Any]) -> None:
    """Add one event's integer seconds to its billing account's totals."""
    data = event["data"]
    account = totals.setdefault(data["billing_account"], dict.fromkeys(QUANTITIES, 0))
    for quantity in QUANTITIES:
        account[quantity] += int(data[quantity])


def consume(
    fetch_page: FetchPage, state_path: Path, max_pages: int | None = None
) -> dict[str, Any]:
    """Fetch pages from the saved cursor until nothing is new (or `max_pages` pages).

    `fetch_page(cursor)` returns one `/v1/usage/events` body. The state (cursor and totals) is
    saved after each page, so an interrupted run resumes without loss or double counting.
    """
    state = load_state(state_path)
    pages = 0
    while max_pages is None or pages < max_pages:
        page = fetch_page(state["cursor"])
        pages += 1
        if not page["data"]:
            state["cursor"] = page["next"] or state["cursor"]
            break
        for event in page["data"]:
            apply_event(state["totals"], event)
        state["events"] += len(page["data"])
        state["cursor"] = page["next"]
        save_state(state_path, state)  # only now is the page done
    return state


def hours(seconds: int) -> str:
    """Seconds as decimal hours with 6 decimals (exact decimal arithmetic, no floats)."""
    return str((Decimal(seconds) / 3600).quantize(Decimal("0.000001")))


def report(state: dict[str, Any]) -> str:
    lines = [f"{'billing account':<32} {'node-hours':>14} {'port-hours':>14} {'access-hours':>14}"]
    for account, totals in sorted(state["totals"].items()):
        node, port, access = (hours(totals[q]) for q in QUANTITIES)
        lines.append(f"{account:<32} {node:>14} {port:>14} {access:>14}")
    lines.append(f"events: {state['events']}")
    return "\n".join(lines)


def http_fetcher(url: str, token: str, limit: int = 500) -> FetchPage:
    """A fetch_page over HTTP with urllib."""

    def fetch(cursor: str | None) -> Page:
        query = {"limit": str(limit), **({"cursor": cursor} if cursor else {})}
        request = urllib.request.Request(
            f"{url.rstrip('/')}/v1/usage/events?{urllib.parse.urlencode(query)}",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            page: Page = json.load(response)
            return page

    return fetch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="Base URL of the isofabric API")
    parser.add_argument("--token", required=True, help="Bearer token (billing role)")
    parser.add_argument("--state", required=True, type=Path, help="State file (cursor, totals)")
    parser.add_argument("--limit", type=int, default=500, help="Events per page")
    parser.add_argument("--poll", type=float, default=0, help="Keep polling every N seconds")
    args = parser.parse_args(argv)
    fetch = http_fetcher(args.url, args.token, args.limit)
    while True:
        state = consume(fetch, args.state)
        print(report(state), flush=True)
        if args.poll <= 0:
            return 0
        time.sleep(args.poll)


if __name__ == "__main__":
    sys.exit(main())
