"""Build this project's wheel offline and install it into fresh virtual environments.

The wheel is built from a copy of the work tree (the build writes build/ and egg-info beside its
source) with this venv's setuptools: no build isolation, no index. A fresh venv gets the wheel
without dependencies; what it may import besides is chosen by the test (`expose`): a .pth line
placed after the new venv's own site-packages, so this project's editable finder, which only
this venv's .pth files start, never shadows the wheel.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "api", "cli", "policies", "tenancy")
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")


def run(*args: str | Path, cwd: Path | None = None, check: bool = True) -> str:
    """Run a command; its stdout (a failure shows both streams)."""
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert not check or done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


def build_wheel(tmp: Path) -> Path:
    """A wheel of a copy of the work tree."""
    source = tmp / "source"
    source.mkdir()
    for path in ROOT.iterdir():
        if path.is_file() and not path.name.startswith(".") and ".db" not in path.name:
            shutil.copy2(path, source)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=SKIPPED)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
        "-q", "-w", tmp / "dist", source)  # fmt: skip
    (wheel,) = (tmp / "dist").glob("isofabric-*.whl")
    return wheel


def fresh_venv(tmp: Path, wheel: Path, name: str = "venv") -> Path:
    """A new venv holding the wheel and nothing else yet."""
    venv = tmp / name
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q",
        "--no-deps", "--no-index", wheel)  # fmt: skip
    return venv


def expose(venv: Path, directory: str | Path) -> None:
    """Let `venv` import what `directory` holds, after its own site-packages."""
    python = venv / "bin" / "python"
    purelib = run(
        python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"
    ).strip()
    Path(purelib, "zz_dependencies.pth").write_text(f"{directory}\n")


def expose_everything(venv: Path) -> None:
    """Let `venv` import every package this venv has (the service's dependencies included)."""
    expose(venv, sysconfig.get_path("purelib"))


def wheel_requirements(wheel: Path, extras: tuple[str, ...] = ()) -> list[Requirement]:
    """The wheel's Requires-Dist that apply with `extras` on this interpreter."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    requirements = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    return [r for r in requirements if _applies(r, extras)]


def _applies(requirement: Requirement, extras: tuple[str, ...]) -> bool:
    marker = requirement.marker
    return marker is None or any(marker.evaluate({"extra": e}) for e in ("", *extras))


def installed_closure(requirements: list[Requirement]) -> set[str]:
    """Names of the distributions these requirements pull in, as this venv resolved them."""
    names: set[str] = set()
    pending = list(requirements)
    while pending:
        requirement = pending.pop()
        name = _normal(requirement.name)
        if name in names:
            continue
        names.add(name)
        requires = distribution(name).requires or []
        pending += [r for r in map(Requirement, requires) if _applies(r, tuple(requirement.extras))]
    return names


def link_distributions(names: set[str], target: Path) -> None:
    """Symlink the installed files of these distributions (packages and metadata) into `target`."""
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        try:
            files = distribution(name).files or []
        except PackageNotFoundError as missing:
            raise AssertionError(f"{name} is required but not installed here") from missing
        site = Path(sysconfig.get_path("purelib"))
        for top in {f.parts[0] for f in files if f.parts[0] != ".."}:
            link = target / top
            if not link.exists() and (site / top).exists():
                link.symlink_to(site / top)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
