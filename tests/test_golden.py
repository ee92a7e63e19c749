"""The shared golden-file helper: byte-for-byte comparison, deliberate regeneration."""

from __future__ import annotations

import pytest

from tests.golden import UPDATE_ENV, assert_golden


@pytest.fixture
def comparing(monkeypatch):
    monkeypatch.delenv(UPDATE_ENV, raising=False)


def test_equal_text_matches_its_golden_file(tmp_path, comparing):
    (tmp_path / "a.conf").write_bytes(b"line 1\nline 2\n")

    assert_golden("a.conf", "line 1\nline 2\n", directory=tmp_path)


def test_a_changed_line_fails_with_a_unified_diff(tmp_path, comparing):
    (tmp_path / "a.conf").write_bytes(b"line 1\nline 2\n")

    with pytest.raises(AssertionError) as failed:
        assert_golden("a.conf", "line 1\nline two\n", directory=tmp_path)

    assert "-line 2\n+line two\n" in str(failed.value)


def test_line_endings_are_compared_byte_for_byte(tmp_path, comparing):
    (tmp_path / "a.conf").write_bytes(b"line 1\r\n")

    with pytest.raises(AssertionError):
        assert_golden("a.conf", "line 1\n", directory=tmp_path)


def test_a_missing_golden_file_fails_and_says_how_to_create_it(tmp_path, comparing):
    with pytest.raises(AssertionError, match=UPDATE_ENV):
        assert_golden("new.conf", "text\n", directory=tmp_path)

    assert not (tmp_path / "new.conf").exists()


def test_update_golden_rewrites_the_file_with_the_rendered_bytes(tmp_path, monkeypatch):
    (tmp_path / "a.conf").write_bytes(b"old\n")
    monkeypatch.setenv(UPDATE_ENV, "1")

    assert_golden("a.conf", "new\n", directory=tmp_path)

    assert (tmp_path / "a.conf").read_bytes() == b"new\n"
