"""docs/maintainers.md places every module: each package has a section, each module a row.

A module added without its row fails here, so the page stays a map a maintainer can trust.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "maintainers.md").read_text()
PACKAGES = ("agent", "api", "cli", "policies", "tenancy")
SKIPPED = {"__init__", "__main__"}


def modules() -> list[Path]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if path.stem in SKIPPED or "migrations" in relative.parts:
                continue
            if relative.parts[:2] == ("api", "agent"):  # the shim package: __init__, __main__
                continue
            found.append(relative)
    return found


def section(package: str) -> str:
    start = PAGE.index(f"### `{package}/`\n")
    end = PAGE.find("\n### ", start + 1)
    following = PAGE.find("\n## ", start + 1)
    ends = [e for e in (end, following) if e > 0]
    return PAGE[start : min(ends) if ends else None]


@pytest.mark.parametrize("module", modules(), ids=str)
def test_every_module_has_a_row_in_its_packages_section(module: Path):
    assert f"### `{module.parent.as_posix()}/`\n" in PAGE, f"no section for {module.parent}"
    assert f"| `{module.stem}` |" in section(module.parent.as_posix())


def test_every_top_level_package_is_placed_with_what_it_may_import():
    for package in PACKAGES:
        assert f"| `{package}/` |" in PAGE
