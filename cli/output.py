"""What client commands print: a table by default, the server's JSON with ``--json``; progress.

Tables go to stdout (rich.table, no colour when stdout is not a terminal, never wrapped in a
pipe); progress goes to stderr and only when stderr is a terminal and ``--quiet`` is not given,
so a script's output is the data alone.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

from cli.client import CHECK_FAILED, CONTROL_CHARACTERS, DONE, Page

Getter = str | Callable[[dict[str, Any]], Any]
Columns = Sequence[tuple[str, Getter]]
PIPE_WIDTH = 240  # rich wraps at 80 columns when it cannot ask a terminal; a pipe wants lines


def print_json(document: Any) -> None:
    """Print a JSON document as the server sent it (members and order unchanged), indented."""
    typer.echo(json.dumps(document, indent=2, ensure_ascii=False))


def _console() -> Console:
    # Made per call: CliRunner and redirections replace sys.stdout while the process runs.
    terminal = sys.stdout.isatty()
    return Console(file=sys.stdout, width=None if terminal else PIPE_WIDTH, soft_wrap=False)


def cell(value: Any) -> str:
    """A JSON value as one table cell: lists joined, segments by their identifiers."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(cell(item) for item in value)
    if isinstance(value, dict):
        return segment(value) if "kind" in value else json.dumps(value, separators=(",", ":"))
    return str(value)


def segment(value: dict[str, Any] | None) -> str:
    """An IB partition as its P_Key; a RoCE segment as VRF, VLAN and VNIs."""
    if not value:
        return ""
    if "pkey" in value:
        return str(value["pkey"])
    if "vrf" in value:
        return f"{value['vrf']} vlan {value.get('vlan')} l2vni {value.get('l2vni')}"
    return json.dumps(value, separators=(",", ":"))


def plain(value: Any) -> Text:
    """A cell as literal text, never rich markup nor terminal control codes.

    The server's strings are data: ``[/x]`` in a name would raise MarkupError, ``[bold]``
    would be styled, an ESC sequence would drive the terminal.
    """
    return Text(cell(value).translate(CONTROL_CHARACTERS))


def _get(item: dict[str, Any], getter: Getter) -> Text:
    return plain(getter(item) if callable(getter) else item.get(getter))


def table(items: Sequence[dict[str, Any]], columns: Columns, title: str | None = None) -> None:
    """Print `items` as a table with one column per (header, key or function)."""
    grid = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False)
    for header, _ in columns:
        grid.add_column(header, overflow="fold")
    for item in items:
        grid.add_row(*(_get(item, getter) for _, getter in columns))
    _console().print(grid)


def listing(page: Page, columns: Columns, *, as_json: bool) -> None:
    """A list: the gathered page as JSON, or a table and a line saying what is left."""
    if as_json:
        print_json(page.as_json())
        return
    table(page.data, columns)
    if page.next is not None:
        typer.echo(f"{len(page.data)} of {page.count} shown (--limit); more follow", err=True)


def record(document: dict[str, Any], *, as_json: bool, fields: Sequence[str] = ()) -> None:
    """One resource: as JSON, or a two-column table of its members (or of `fields` only)."""
    if as_json:
        print_json(document)
        return
    names = fields or list(document)
    grid = Table(box=box.SIMPLE_HEAD, show_header=False, pad_edge=False)
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name in names:
        grid.add_row(plain(name), plain(document.get(name)))
    _console().print(grid)


def dry_run(answer: dict[str, Any], *, as_json: bool) -> int:
    """A dry run's answer (DryRunView); the exit status: 1 when the change would break isolation."""
    if as_json:
        print_json(answer)
    else:
        typer.echo(f"dry run: nothing written; isolation would {_verdict(answer['holds'])}")
        table(answer.get("fabrics", []), DRY_RUN_COLUMNS)
        _counterexamples(answer)
    return DONE if answer.get("holds") else CHECK_FAILED


def _verdict(holds: bool) -> str:
    return "hold" if holds else "NOT hold"


def _changed(fabric: dict[str, Any]) -> str:
    paths = [a["path"] for a in fabric.get("artifacts", []) if a.get("diff") is not None]
    return ", ".join(paths) or "none"


def _reach(fabric: dict[str, Any]) -> str:
    delta = fabric.get("reachability", {})
    return f"+{len(delta.get('added', []))} -{len(delta.get('removed', []))}"


DRY_RUN_COLUMNS: Columns = (
    ("FABRIC", "fabric"),
    ("HOLDS", "holds"),
    ("COUNTEREXAMPLES", lambda f: len(f.get("counterexamples", []))),
    ("REACHABILITY", _reach),
    ("FILES CHANGED", _changed),
)


def _counterexamples(answer: dict[str, Any]) -> None:
    for fabric in answer.get("fabrics", []):
        for example in fabric.get("counterexamples", []):
            typer.echo(f"{fabric['fabric']}: {example.get('rule')}: {example.get('message')}")


@contextmanager
def progress(
    description: str, total: int | None, *, quiet: bool, console: Console | None = None
) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(bytes)``; draws a bar on stderr when it is a terminal and not `quiet`."""
    console = console or Console(stderr=True)
    if quiet or not console.is_terminal:
        yield lambda _done: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done: bar.advance(task, done)
