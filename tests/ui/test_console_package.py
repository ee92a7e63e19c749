"""The wheel carries the console: every template and static file is package data (no CDN)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from api.ui.render import STATIC_DIR, TEMPLATES_DIR
from tests.wheel import ROOT, build_wheel


def test_the_wheel_holds_every_console_template_and_static_file(tmp_path: Path):
    wheel = build_wheel(tmp_path)
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        path.relative_to(ROOT).as_posix()
        for directory in (TEMPLATES_DIR, STATIC_DIR)
        for path in directory.rglob("*")
        if path.is_file()
    }
    assert expected, "the console has templates and static files"
    assert expected - shipped == set()
