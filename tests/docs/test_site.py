"""`make docs`: the documentation site builds strictly and reads offline (mkdocs.yml)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.builders import REPO

MKDOCS = Path(sys.prefix) / "bin" / "mkdocs"
# What a page makes the browser load (not links the reader may follow).
LOADED = re.compile(
    r"""<(?:script|img|iframe)\b[^>]*\bsrc="([^"]+)"|<link\b[^>]*\bhref="([^"]+)\""""
)


def nav_pages(nav: list[Any]) -> list[str]:
    pages: list[str] = []
    for item in nav:
        value = item if isinstance(item, str) else next(iter(item.values()))
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def build(site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    argv = [str(MKDOCS), "build", "--strict", "--quiet", "--site-dir", str(site)]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly_with_every_page_in_the_navigation(tmp_path):
    built = build(tmp_path / "site")

    assert built.returncode == 0, built.stderr
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    listed = set(nav_pages(config["nav"]))
    written = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert listed == written
    for page in listed:
        html = page.replace("README.md", "index.md").replace(".md", ".html")  # MkDocs' rule
        assert (tmp_path / "site" / html).is_file(), page


def test_no_page_loads_anything_from_outside_the_site(tmp_path):
    assert build(tmp_path / "site").returncode == 0
    for html in (tmp_path / "site").rglob("*.html"):
        for found in LOADED.finditer(html.read_text()):
            url = found[1] or found[2]
            assert not re.match(r"^(https?:)?//", url), f"{html.name} loads {url}"
