"""Responses serialized in pieces by the handler are the bytes FastAPI would have sent."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, TypeAdapter

from api.responses import CHUNK_ITEMS, json_bytes
from tenancy.schemas import (
    AuditFindingView,
    ConfigAuditView,
    NicChange,
    PortMove,
    TopologyImportResult,
    TopologyPortChange,
)

LONG = CHUNK_ITEMS * 2 + 7


def fastapi_bytes(model: BaseModel) -> bytes:
    # What FastAPI's response serialization does (fastapi/_compat/v2.py serialize_json).
    return TypeAdapter(type(model)).dump_json(model, by_alias=True)


def port(index: int) -> TopologyPortChange:
    return TopologyPortChange(
        guid=f"0x{index:016x}",
        node=f"gpu{index // 8:05d}",
        hca="mlx5_0",
        port=1,
        allocated=False,
        action="added",
    )


def result(added: int, moved: int = 0) -> TopologyImportResult:
    return TopologyImportResult(
        switches=3,
        nodes=added // 8,
        ports=added,
        added=[port(i) for i in range(added)],
        missing=[],
        moved=[
            PortMove(port=f"0x{i:016x}", **{"from": "gpu1", "to": "gpu2"}) for i in range(moved)
        ],
        absent_nodes=["gpu09999"],
    )


@pytest.mark.parametrize(
    "model",
    [
        result(3),
        result(LONG),
        result(LONG, moved=LONG),  # PortMove serializes "from"/"to" by alias
        TopologyImportResult(
            switches=1,
            nodes=1,
            ports=0,
            added=[NicChange(node=f"n{i}", nic="eth0") for i in range(LONG)],
            missing=[],
        ),
        ConfigAuditView(
            fabric="ib-east",
            format="partitions",
            leaf=None,
            snapshot_digest="sha256:" + "ab" * 32,
            holds=True,
            findings=[
                AuditFindingView(code="c", severity="warning", line=i, message="m\u00e9")
                for i in range(LONG)
            ],
            drift=[],
            counterexamples=[],
        ),
    ],
    ids=["short", "long", "long-aliased", "long-union-member", "audit"],
)
def test_the_bytes_are_fastapis(model):
    assert json_bytes(model) == fastapi_bytes(model)


class Mixed(BaseModel):
    items: list[BaseModel]
    hidden: int = Field(default=1, exclude=True)


def test_a_list_declared_as_another_type_and_an_excluded_field_serialize_as_a_whole():
    model = Mixed(items=[port(i) for i in range(LONG)])

    assert json_bytes(model) == fastapi_bytes(model)
