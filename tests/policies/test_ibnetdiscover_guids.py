"""GUIDs no device has are refused at import, naming the line (hardening issue 10, item 5)."""

import pytest

from policies.errors import InputFormatError
from policies.infiniband.parse_ibnetdiscover import parse_ibnetdiscover

from .test_ibnetdiscover import GPU_PORT_LINE, LINES, document

SWITCH_LINE = 10
SWITCH_PORT_TO_GPU = 12
ALL_ONES = "ffffffffffffffff"


def refused(text: str) -> InputFormatError:
    with pytest.raises(InputFormatError) as caught:
        parse_ibnetdiscover(text)
    return caught.value


@pytest.mark.parametrize(("guid", "word"), [("0", "(0)"), (ALL_ONES, "(all ones)")])
def test_a_reserved_ca_port_guid_is_refused_on_its_line(guid, word):
    text = document(
        (SWITCH_PORT_TO_GPU, LINES[SWITCH_PORT_TO_GPU - 1].replace("(100003)", f"({guid})")),
        (GPU_PORT_LINE, LINES[GPU_PORT_LINE - 1].replace("[1](100003)", f"[1]({guid})")),
    )

    error = refused(text)

    assert error.line == GPU_PORT_LINE
    assert "port GUID" in error.detail
    assert word in error.detail


def test_a_reserved_switch_guid_is_refused_on_its_record():
    text = document((SWITCH_LINE, LINES[SWITCH_LINE - 1].replace("0000000000200000", "0" * 16)))

    error = refused(text)

    assert error.line == SWITCH_LINE
    assert "switch GUID 0x0 (0) is reserved" in error.detail


def test_a_ca_port_that_claims_a_switch_guid_is_refused():
    text = document(
        (SWITCH_PORT_TO_GPU, LINES[SWITCH_PORT_TO_GPU - 1].replace("(100003)", "(200000)")),
        (GPU_PORT_LINE, LINES[GPU_PORT_LINE - 1].replace("[1](100003)", "[1](200000)")),
    )

    error = refused(text)

    assert error.line == GPU_PORT_LINE
    assert "also the GUID of switch 'leaf01' (line 10)" in error.detail


def test_ordinary_guids_still_parse():
    assert len(parse_ibnetdiscover(document()).ca_ports) == 2
