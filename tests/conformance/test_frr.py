"""Conformance: every rendered leaf frr.conf through FRR's own offline checkers.

Two checkers, both offline (docs/facts/roce.md §4; observed with FRR 8.4.4 in this project's lab):

* ``vtysh -C -f FILE``: grammar only, exit code 2 on ``% Unknown command`` (e.g. VNI 16777216);
* ``bgpd -C -Z -p 0 -P 0 -l 127.0.0.1 -f FILE``: bgpd's dry run (no zebra, no listener, no
  vty) runs bgpd's handlers and prints ``% Malformed Route Target list`` and friends, but
  **always exits 0**, so its output is read. Lines only zebra knows (``vrf``, ``vni``,
  ``exit-vrf``) show up as "No such command", and every ``network`` statement logs a failed
  zclient send (zebra is not running); both are expected and filtered, anything else fails.

bgpd drops privileges to user frr at start, so the checkers run as root. Tests skip when FRR is
missing (or not root) unless ``ISOFABRIC_REQUIRE_CONFORMANCE=1``, then they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from policies.roce.parse_frr import parse_frr_conf
from policies.roce.render_frr import render_frr_conf
from tests.policies.roce_snapshots import roce_snapshot

from .conftest import skip_or_fail

pytestmark = pytest.mark.conformance

LEAVES = tuple(s.name for s in roce_snapshot().leaves())
BGPD_FALLBACK = Path("/usr/lib/frr/bgpd")
# bgpd dry-run noise: zebra-only lines, and the nexthop registration zebra is not there for.
_ZEBRA_ONLY = re.compile(r"No such command on config line \d+: (vrf \S+| vni \d+|exit-vrf)$")
_NO_ZEBRA = re.compile(r"sendmsg_nexthop: zclient_send_message\(\) failed$")
# FRR's zlog keeps a crash-log directory per process, /var/tmp/frr/<daemon>.<pid>, and a dry run
# leaves it behind (lib/zlog.c, zlog_init); when a later bgpd gets a recycled PID, mkdir fails and
# bgpd logs these two lines. They say nothing about the file under test.
_STALE_ZLOG_DIR = re.compile(
    r'failed to mkdir "/var/tmp/frr/[^"]+": File exists$'
    r"|crashlog and per-thread log buffering unavailable!$"
)
_TIMEOUT = 30


@dataclass(frozen=True)
class FrrTools:
    """Paths of the two checkers."""

    vtysh: str
    bgpd: str

    def vtysh_check(self, path: Path) -> subprocess.CompletedProcess[str]:
        """``vtysh -C -f path``: grammar check, non-zero exit on an unknown command."""
        return _run([self.vtysh, "-C", "-f", str(path)])

    def bgpd_dry_run(self, path: Path) -> list[str]:
        """bgpd's dry run; its output lines (stdout and stderr; the exit code is always 0).

        bgpd reads the file after dropping to user frr, and pytest's tmp dirs are private to
        root, so the file is copied to a world-readable temporary directory first.
        """
        with tempfile.TemporaryDirectory(prefix="isofabric-frr-") as readable:
            os.chmod(readable, 0o755)
            copy = Path(readable) / path.name
            copy.write_text(path.read_text())
            copy.chmod(0o644)
            argv = [self.bgpd, "-C", "-Z", "-p", "0", "-P", "0", "-l", "127.0.0.1", "-f", str(copy)]
            done = _run(argv)
        return (done.stdout + done.stderr).splitlines()


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VTYSH_PAGER": "cat"}
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=_TIMEOUT, check=False, env=env
    )


def _find_bgpd() -> str | None:
    """bgpd is not on PATH: ask dpkg where the frr package put it, else the Debian default."""
    dpkg = shutil.which("dpkg")
    if dpkg is not None:
        listing = _run([dpkg, "-L", "frr"]).stdout.splitlines()
        found = [line for line in listing if line.endswith("/bgpd") and os.access(line, os.X_OK)]
        if found:
            return found[0]
    return str(BGPD_FALLBACK) if os.access(BGPD_FALLBACK, os.X_OK) else None


@pytest.fixture(scope="module")
def frr() -> FrrTools:
    vtysh, bgpd = shutil.which("vtysh"), _find_bgpd()
    if vtysh is None or bgpd is None:
        skip_or_fail("FRR is not installed (need vtysh and bgpd)")
    if os.geteuid() != 0:
        skip_or_fail("FRR's offline checkers need root (bgpd drops privileges to user frr)")
    return FrrTools(vtysh, bgpd)


def unexpected(lines: list[str]) -> list[str]:
    """The dry run's lines that are neither zebra's absence nor FRR's crash-log directory."""
    noise = (_ZEBRA_ONLY, _NO_ZEBRA, _STALE_ZLOG_DIR)
    return [line for line in lines if not any(pattern.search(line) for pattern in noise)]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(params=LEAVES)
def rendered(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    leaf = str(request.param)
    return leaf, write(tmp_path, f"{leaf}.conf", render_frr_conf(roce_snapshot(), leaf))


def test_vtysh_accepts_every_rendered_leaf(frr: FrrTools, rendered: tuple[str, Path]) -> None:
    _, path = rendered

    done = frr.vtysh_check(path)

    assert done.returncode == 0, done.stdout + done.stderr


def test_bgpd_dry_run_reports_nothing_but_zebra_lines(
    frr: FrrTools, rendered: tuple[str, Path]
) -> None:
    _, path = rendered

    lines = frr.bgpd_dry_run(path)

    assert not [line for line in lines if "% Malformed" in line]
    assert unexpected(lines) == []
    # Every zebra-only line was seen (the filter matched something real, not nothing).
    assert sum(bool(_ZEBRA_ONLY.search(line)) for line in lines) == 3 * path.read_text().count(
        "exit-vrf"
    )


LEAK = "  route-target import 65000:50000\n"  # acme's import of the storage RT


@pytest.mark.parametrize("bad", ["65000", "tenantA:1", "65000:50001:7", "*:50000"])
def test_bgpd_and_the_parser_both_reject_a_malformed_rt(
    frr: FrrTools, tmp_path: Path, bad: str
) -> None:
    text = render_frr_conf(roce_snapshot(), "leaf01")
    assert LEAK in text
    broken = text.replace(LEAK, f"  route-target import {bad}\n")

    lines = frr.bgpd_dry_run(write(tmp_path, "bad-rt.conf", broken))

    assert "% Malformed Route Target list" in lines
    assert frr.vtysh_check(tmp_path / "bad-rt.conf").returncode == 0  # vtysh does not notice
    assert "malformed-rt" in [f.code for f in parse_frr_conf(broken).findings]


def test_vtysh_and_the_parser_both_reject_vni_16777216(frr: FrrTools, tmp_path: Path) -> None:
    text = render_frr_conf(roce_snapshot(), "leaf01").replace(" vni 50001\n", " vni 16777216\n")

    done = frr.vtysh_check(write(tmp_path, "bad-vni.conf", text))

    assert done.returncode != 0
    assert "% Unknown command" in done.stdout + done.stderr
    assert "bad-vni" in [f.code for f in parse_frr_conf(text).findings]


@pytest.mark.parametrize(
    ("old", "new", "code", "bgpd_says"),
    [
        # bgpd: per-VNI rd/route-target need advertise-all-vni first (EVPN_ENABLED).
        ("  advertise-all-vni\n", "", "vni-before-advertise-all-vni", "only supported under EVPN"),
        ("  advertise ipv4 unicast\n", "  advertise-all-vni\n", "advertise-all-vni-in-vrf", "%"),
    ],
)
def test_parser_findings_match_what_bgpd_refuses(
    frr: FrrTools, tmp_path: Path, old: str, new: str, code: str, bgpd_says: str
) -> None:
    text = render_frr_conf(roce_snapshot(), "leaf01").replace(old, new, 1)

    lines = frr.bgpd_dry_run(write(tmp_path, "context.conf", text))

    assert any(bgpd_says in line for line in unexpected(lines)), lines
    assert code in [f.code for f in parse_frr_conf(text).findings]
