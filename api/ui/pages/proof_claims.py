"""An isolation proof's claims in readable form, for the proof page (api/ui/pages/evidence.py).

The payload is decoded for display only; what it says is checked in the browser (static/
evidence.js: the signature over exactly these bytes, then the subjects' digests) and offline by
`isofabric proof verify`. The predicate's members are those of policies/evidence/proofs.py
(tenant, fabric, kind, view, snapshot_digest, rules, verdict, engine, time, endpoints,
ownership, segments, reachable, peerings, policy, dedicated_leaf; vrfs on RoCE). A payload
that is not a Statement (a proof stored by a broken version) shows as unreadable, not a 500.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from tenancy.schemas import DSSEEnvelope, SigningKeyView

KIND_LABELS = {"infiniband": "InfiniBand", "roce": "RoCE"}


def statement_of(envelope: DSSEEnvelope) -> dict[str, Any] | None:
    """The in-toto Statement the envelope's payload holds, or None when it holds none."""
    try:
        statement = json.loads(base64.b64decode(envelope.payload, validate=True))
    except (binascii.Error, ValueError):
        return None
    ok = isinstance(statement, dict) and isinstance(statement.get("predicate"), dict)
    return statement if ok else None


def readable_claims(statement: dict[str, Any]) -> dict[str, Any]:
    """What the proof page shows: summary, subjects, reachability, segments, policy, peerings."""
    predicate: dict[str, Any] = statement["predicate"]
    ownership = _mapping(predicate.get("ownership"))
    return {
        "tenant": predicate.get("tenant"),
        "fabric": predicate.get("fabric"),
        "kind": KIND_LABELS.get(str(predicate.get("kind")), predicate.get("kind")),
        "view": predicate.get("view", "full"),
        "holds": _mapping(predicate.get("verdict")).get("holds") is True,
        "time": predicate.get("time"),
        "snapshot_digest": predicate.get("snapshot_digest"),
        "engine": _mapping(predicate.get("engine")),
        "rules": _list(predicate.get("rules")),
        "subjects": [
            {"name": s.get("name"), "sha256": _mapping(s.get("digest")).get("sha256")}
            for s in _list(statement.get("subject"))
            if isinstance(s, dict)
        ],
        "reachable": [r for r in _list(predicate.get("reachable")) if isinstance(r, dict)],
        "segments": [segment_row(s) for s in _list(predicate.get("segments"))],
        "endpoints": [
            {"endpoint": e, "owner": ownership.get(e, "")}
            for e in _list(predicate.get("endpoints"))
        ],
        "peerings": None if "peerings" not in predicate else _list(predicate["peerings"]),
        "policy": predicate.get("policy"),
        "dedicated_leaf": predicate.get("dedicated_leaf"),
    }


def segment_row(segment: Any) -> dict[str, Any]:
    """A segment's id, owner, member counts by membership, others (tenant view), RoCE ids."""
    segment = _mapping(segment)
    members = _list(segment.get("members"))
    full = sum(1 for m in members if isinstance(m, dict) and m.get("membership") == "full")
    limited = sum(1 for m in members if isinstance(m, dict) and m.get("membership") == "limited")
    roce = {k: segment[k] for k in ("vlan", "l2vni", "vrf", "subnet") if k in segment}
    return {
        "segment": segment.get("segment"),
        "owner": segment.get("owner", ""),
        "members": len(members),
        "full": full,
        "limited": limited,
        "others": segment.get("others"),
        "roce": roce,
    }


def signer_rows(envelope: DSSEEnvelope, keys: list[SigningKeyView]) -> list[dict[str, Any]]:
    """Each signature's key id and, when the service publishes it, the key's name and status."""
    published = {key.keyid: key for key in keys}
    rows = []
    for signature in envelope.signatures:
        key = published.get(signature.keyid)
        rows.append({
            "keyid": signature.keyid,
            "name": key.name if key else None,
            "status": key.status if key else "not published",
        })  # fmt: skip
    return rows


def keys_for_browser(keys: list[SigningKeyView]) -> list[dict[str, str | None]]:
    """The published keys as the browser check takes them (raw key as base64url: JWK ``x``).

    A retired key carries its retirement time (``retired_at``): the check refuses a proof it
    signed later, as `isofabric proof verify` does (policies/evidence/keyring.py).
    """
    return [
        {
            "keyid": k.keyid,
            "name": k.name,
            "x": k.jwk.x,
            "status": k.status,
            "retired_at": k.retired.at if k.retired is not None else None,
        }
        for k in keys
    ]


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
