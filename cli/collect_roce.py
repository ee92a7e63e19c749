"""`isofabric collect roce`: read one SONiC leaf's CONFIG_DB and FRR state, compare it with intent.

CONFIG_DB is read from Redis in the layout SONiC's ConfigDBConnector uses (``TABLE|key`` hashes,
``field@`` lists, ``NULL`` entries; agent/config_db.py, the deploy agent's reader), at
``--config-db`` (``redis://HOST:PORT/4`` or ``unix:///path/redis.sock?db=4``; database 4 is
CONFIG_DB on a switch). With ``--vtysh`` FRR is read too: ``show running-config`` (each BGP VRF
instance's route-target imports) and ``show bgp l2vpn evpn vni json`` (each VNI's RTs), through
``-N NAME`` with ``--frr-pathspace``.

The document (the body of ``POST /v1/fabrics/{fabric}/observations``, `kind` ``roce``) is
compared where the command is told: over REST with ``--url`` (or ``ISOFABRIC_URL``), on the
database with ``--db``; with neither it is printed (``--out`` writes it to a file in every
mode). Exit status: 0 the leaf matches intent; 1 it drifted or allows a violation; 7 partial (FRR
could not be read: the document says why and the rest is still compared); 2 nothing was read
(CONFIG_DB unreachable) or a usage error.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

import typer

from cli.client import JsonOption, TokenOption, UrlOption, fail, one_line
from cli.collect import PARTIAL, TROUBLE
from cli.options import DbOption, FabricOption, open_uow
from cli.rest_counterparts import exclusive

if TYPE_CHECKING:  # imported where used: Redis and FRR's parsers cost every command 0.2 s
    from agent.frr import FrrTools
    from policies.roce.observed import FrrState, LeafState

RUNNING_CONFIG = "show running-config"
EVPN_VNIS = "show bgp l2vpn evpn vni json"
DRIFTED = 1


def read_config_db(url: str) -> LeafState:
    """The tenant state of the CONFIG_DB at `url` (`StoreError` when it cannot be read)."""
    from agent.config_db import RedisConfigDb
    from policies.roce.observed import leaf_state

    return leaf_state(RedisConfigDb.from_url(url).read())


def read_frr(tools: FrrTools) -> FrrState:
    """FRR's tenant state through vtysh (`FrrError` or `InputFormatError` when unreadable)."""
    from agent.frr import run_command
    from policies.roce.observed import running_frr_state

    running = run_command(tools.vtysh_argv(RUNNING_CONFIG))
    return running_frr_state(running, run_command(tools.vtysh_argv(EVPN_VNIS)))


def observation_document(
    leaf: str, state: LeafState, frr: FrrState | None, frr_error: str | None = None
) -> dict[str, Any]:
    """The observation document of `leaf` (tenancy.schemas.RoceObservationCreate's shape)."""
    document: dict[str, Any] = {
        "kind": "roce",
        "leaf": leaf,
        "collected_at": datetime.now(UTC).isoformat(),
        "vlan_members": {port: sorted(v) for port, v in sorted(state.vlan_members.items())},
        "vrfs": dict(sorted(state.vrfs.items())),
        "tunnel_maps": [
            {"tunnel": m.tunnel, "name": m.name, "vni": m.vni, "vlan": m.vlan}
            for m in sorted(state.tunnel_maps)
        ],
        "port_qos_maps": {port: dict(f) for port, f in sorted(state.port_qos.items())},
        "frr": None if frr is None else _frr_member(frr),
    }
    if frr_error is not None:
        document["frr_error"] = frr_error
    return document


def _frr_member(frr: FrrState) -> dict[str, Any]:
    vnis = [
        {
            "vni": v.vni,
            "layer": v.kind,
            "import_rts": sorted(v.imports),
            "export_rts": sorted(v.exports),
        }
        for _, v in sorted(frr.vnis.items())
    ]
    imports = {vrf: sorted(rts) for vrf, rts in sorted(frr.vrf_imports.items())}
    return {"vnis": vnis, "vrf_imports": imports}


def collect_roce(leaf: str, config_db: str, frr_tools: FrrTools | None) -> dict[str, Any]:
    """Read the leaf; its observation document. FRR only with `frr_tools`.

    A failed FRR read does not stop the collection: the document has ``frr`` null and a
    ``frr_error``.

    Raises:
        StoreError: CONFIG_DB cannot be read.
    """
    from agent.frr import FrrError
    from policies.errors import InputFormatError

    state = read_config_db(config_db)
    if frr_tools is None:
        return observation_document(leaf, state, None)
    try:
        return observation_document(leaf, state, read_frr(frr_tools))
    except (FrrError, InputFormatError) as error:
        return observation_document(leaf, state, None, one_line(str(error)))


def _compare(
    document: dict[str, Any], fabric: str, url: str | None, token: str | None, db: str | None
) -> dict[str, Any]:
    """The service's comparison: over REST, or on the database."""
    if exclusive(url, db):
        from cli.client import ApiClient

        path = f"/v1/fabrics/{quote(fabric, safe='')}/observations"
        with ApiClient(url, token, as_json=True) as api:
            answer: dict[str, Any] = api.json("POST", path, json=document)
        return answer
    from tenancy.schemas import RoceObservationCreate
    from tenancy.usecases.roce_observations import observe_leaf

    body = RoceObservationCreate.model_validate(document)
    return observe_leaf(open_uow(db), fabric_name=fabric, document=body).model_dump(mode="json")


def collect_roce_command(
    fabric: FabricOption,
    leaf: Annotated[str, typer.Option("--leaf", help="The leaf switch's name in the fabric")],
    config_db: Annotated[
        str,
        typer.Option(
            "--config-db",
            help="CONFIG_DB's Redis: redis://HOST:PORT/4 or unix:///path/redis.sock?db=4",
        ),
    ],
    vtysh: Annotated[
        str | None, typer.Option("--vtysh", help="vtysh to read FRR with (default: FRR unread)")
    ] = None,
    pathspace: Annotated[
        str | None, typer.Option("--frr-pathspace", help="FRR's pathspace (vtysh -N NAME)")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Also write the document here")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Read a SONiC leaf's CONFIG_DB (and FRR with --vtysh); compare it with intent.

    Over REST with --url, on the database with --db; with neither, print the observation
    document. Exit 0 no drift, 1 drift or a violation, 7 FRR unread (the rest compared), 2
    nothing read.
    """
    from agent.config_db import StoreError
    from agent.frr import FrrTools

    tools = FrrTools(vtysh=vtysh, pathspace=pathspace) if vtysh else None
    if pathspace and not vtysh:
        fail("--frr-pathspace needs --vtysh (FRR is read only with it)", TROUBLE)
    try:
        document = collect_roce(leaf, config_db, tools)
    except StoreError as error:
        fail(str(error), TROUBLE)
    text = json.dumps(document, indent=2) + "\n"
    if out is not None:
        out.write_text(text)
    drifted = False
    if url or db:
        report = _compare(document, fabric, url, token, db)
        typer.echo(json.dumps(report, indent=2) if as_json else _summary(report))
        drifted = not (report["in_sync"] and report["holds"])
    elif out is None:
        typer.echo(text, nl=False)
    _finish(document, drifted=drifted)


def _summary(report: dict[str, Any]) -> str:
    lines = [f"{d['code']}: {d['message']}" for d in report["drift"]]
    lines += [f"violation: {c['rule']}: {c['message']}" for c in report["counterexamples"]]
    state = "in sync" if report["in_sync"] else f"{len(report['drift'])} drift item(s)"
    holds = "isolation holds" if report["holds"] else "isolation does NOT hold"
    frr = "" if report["frr_observed"] else " (FRR not observed)"
    lines.append(f"{report['leaf']}: {state}, {holds}{frr}")
    return "\n".join(lines)


def _finish(document: dict[str, Any], *, drifted: bool) -> None:
    if document.get("frr_error"):
        typer.echo(f"failed: FRR: {document['frr_error']}", err=True)
    if drifted:
        raise typer.Exit(DRIFTED)
    if document.get("frr_error"):
        raise typer.Exit(PARTIAL)
