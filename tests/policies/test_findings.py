"""The one severity scale every parser and audit reports on."""

import pytest

from policies.findings import Severity


def test_severities_are_ordered_critical_error_warning_info():
    ordered = [Severity.INFO, Severity.WARNING, Severity.ERROR, Severity.CRITICAL]

    assert sorted([Severity.WARNING, Severity.CRITICAL, Severity.INFO, Severity.ERROR]) == ordered
    assert Severity.CRITICAL > Severity.ERROR > Severity.WARNING > Severity.INFO
    assert max(ordered) is Severity.CRITICAL


def test_severities_keep_the_strings_reports_have_always_carried():
    assert [s.value for s in Severity] == ["critical", "error", "warning", "info"]
    assert Severity("warning") is Severity.WARNING


def test_a_severity_does_not_compare_with_a_plain_string():
    # "critical" < "warning" alphabetically: an ordering by text would invert the scale.
    with pytest.raises(TypeError):
        _ = Severity.CRITICAL > "warning"
