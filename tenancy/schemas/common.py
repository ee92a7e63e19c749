"""Shared request/response building blocks: strict models, slugs, P_Keys, pages, ranges.

Validation here is the edge: names are slugs, P_Keys and GUIDs lower-case hex, so nothing a
client sends can inject a line or a separator into an artifact.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Any, Generic, Self, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    model_validator,
)

from policies.infiniband.model import MAX_TENANT_PKEY, MIN_PKEY, format_pkey

SLUG_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"


NODE_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"


HEX_PKEY_PATTERN = r"^0[xX][0-9a-fA-F]{1,4}$"


# A time in a query string, before it is parsed as ISO 8601: only its characters and length.
TIME_TEXT_PATTERN = r"^[0-9T:.+\-Zz ]{10,40}$"


# OpenSM 3.3.23 rate codes 2..22 (IB_PATH_RECORD_RATE_*; 23/24 arrived in 3.3.24).
IB_RATE_CODES = range(2, 23)


Slug = Annotated[str, Field(pattern=SLUG_PATTERN, examples=["acme"])]


BILLING_ACCOUNT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"


BillingAccount = Annotated[str, Field(pattern=BILLING_ACCOUNT_PATTERN, examples=["acct:acme-01"])]


NodeName = Annotated[str, Field(pattern=NODE_NAME_PATTERN, examples=["gpu0001"])]


T = TypeVar("T")


class Strict(BaseModel):
    """A model that refuses unknown members (a 422) instead of dropping them; most bodies use it."""

    model_config = ConfigDict(extra="forbid")


def _pkey_value(text: str) -> int:
    value = int(text, 16)
    if not MIN_PKEY <= value <= MAX_TENANT_PKEY:
        raise ValueError(
            f"P_Key must be between {format_pkey(MIN_PKEY)} and {format_pkey(MAX_TENANT_PKEY)} "
            "(0x7fff is the default partition; bit 0x8000 is a port's membership, not part of "
            "a key)"
        )
    return value


PKeyText = Annotated[str, Field(pattern=HEX_PKEY_PATTERN, examples=["0x0101"])]


PKeyInput = Annotated[PKeyText, AfterValidator(lambda text: format_pkey(_pkey_value(text)))]


class Page(BaseModel, Generic[T]):
    """The list envelope every list endpoint returns."""

    # A parametrized model (Page[TenantView]) has no docstring of its own: say it here, once.
    model_config = ConfigDict(
        json_schema_extra={
            "description": "One page of a list: `data`, the total `count` and the `next` cursor"
        }
    )

    data: list[T] = Field(
        description="This page's items, at most `limit` of them, in the list's order"
    )
    count: int = Field(description="Total number of items matching the filters, on all pages")
    next: str | None = Field(
        description="Opaque cursor of the next page (pass it as `cursor`), null on the last page"
    )


def left_out(value: object) -> bool:
    """`exclude_if` of a member left out of the JSON when null (the other technology's).

    A field-level rule keeps the member's type in the OpenAPI document, where a model serializer
    that drops nulls would make the whole view an untyped object.
    """
    return value is None


def problem_extensions(model: BaseModel) -> dict[str, Any]:
    """A model as a JSON-ready dict (used for problem+json extension members)."""
    return model.model_dump(mode="json", by_alias=True)


def _text_only(value: Any) -> Any:
    # ipaddress accepts integers (and bools, which are ints): an address must be written as text.
    if not isinstance(value, str | IPv4Address | IPv4Network):
        raise ValueError("must be a string in dotted-quad notation")
    return value


Ipv4Text = Annotated[IPv4Address, BeforeValidator(_text_only)]


Ipv4NetworkText = Annotated[IPv4Network, BeforeValidator(_text_only)]


PORT_NAME_PATTERN = r"^Ethernet[0-9]{1,4}$"


SWITCH_PORT_REF = r"^[a-z0-9][a-z0-9._-]{0,62}:Ethernet[0-9]{1,4}$"


MAC_PATTERN = r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$"


class IntRange(Strict):
    """An inclusive range of integers (a VLAN or VNI pool); `first` must not be above `last`."""

    first: StrictInt = Field(description="Lowest value of the range")
    last: StrictInt = Field(description="Highest value of the range, not below `first`")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.first > self.last:
            raise ValueError("first must not be above last")
        return self


HEX_GUID_PATTERN = "^0[xX][0-9a-fA-F]{1,16}$"
