"""`isofabric collect ib` with fake tools: concurrent reads, a failed port, progress, exit status.

Two kinds of fakes: an in-process `run_tool` whose smpquery waits at a barrier of `--jobs`
parties (so the reads must really overlap, without looking at a clock), and shell scripts named
``ibnetdiscover`` and ``smpquery`` first on PATH, which the command runs as it would the real
tools (issue 14, item 7).
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from agent.ibdiag import CollectError, PortRead, read_pkey_tables, read_ports
from cli import app
from cli import collect as collect_module
from cli.collect import PARTIAL, PortProgress, collect_ib, collect_ib_command

runner = CliRunner()
TROUBLE = 2
GUID0 = 0x0002C90300A00000


def ca_report(lids: list[int]) -> str:
    """``ibnetdiscover -p`` lines for one CA port per LID (GUID = GUID0 + LID)."""
    return "".join(
        f"CA {lid:5d}  1 0x{GUID0 + lid:016x} 4x EDR - SW     1 {lid:4d} 0x0002c90300b00001 "
        f"( 'gpu{lid:04d} mlx5_0' - 'leaf01' )\n"
        for lid in lids
    )


def pkeys_output(lid: int) -> str:
    """What ``smpquery pkeys`` prints: 0xffff and a P_Key that names the LID."""
    return (
        f"   0: 0xffff 0x{0x8100 + lid:04x} 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000\n"
        "8 pkeys capacity for this port\n"
    )


def guid(lid: int) -> str:
    return f"0x{GUID0 + lid:016x}"


class BarrierTools:
    """A fake `run_tool`: every smpquery waits until `jobs` of them run at once.

    With fewer workers the barrier times out (BrokenBarrierError, a failed test), and `most`
    records how many ran at once. LIDs in `fail` exit 1; in `garbled`, print nonsense.
    """

    def __init__(self, lids: list[int], jobs: int, fail: set[int], garbled: set[int]) -> None:
        self.lids, self.fail, self.garbled = lids, fail, garbled
        self.barrier = threading.Barrier(jobs, timeout=30)
        self.lock = threading.Lock()
        self.running = self.most = 0

    def __call__(self, argv: list[str], env: Mapping[str, str] | None, timeout: float) -> str:
        if argv[0] == "ibnetdiscover":
            return ca_report(self.lids) if "-p" in argv else "Switch 36 'leaf01'\n"
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            self.barrier.wait()
            return self._answer(int(argv[-1]))
        finally:
            with self.lock:
                self.running -= 1

    def _answer(self, lid: int) -> str:
        if lid in self.fail:
            raise CollectError(f"smpquery pkeys {lid} exited 1:\nibwarn: mad_rpc failed\n")
        return "no table here\n" if lid in self.garbled else pkeys_output(lid)


class Recorder:
    """A `ReadProgress` that keeps what it was told."""

    def __init__(self) -> None:
        self.total: int | None = None
        self.reads: list[PortRead] = []

    def begin(self, total: int) -> None:
        self.total = total

    def advance(self, port: PortRead) -> None:
        self.reads.append(port)


def install(monkeypatch: pytest.MonkeyPatch, fake: BarrierTools) -> None:
    monkeypatch.setattr("agent.ibdiag.run_tool", fake)
    monkeypatch.setattr(collect_module, "run_tool", fake)


@pytest.mark.parametrize("jobs", [1, 3, 6])
def test_jobs_reads_run_at_once_and_no_more(monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    lids = list(range(1, 2 * jobs + 1))
    fake = BarrierTools(lids, jobs, fail=set(), garbled=set())
    install(monkeypatch, fake)

    document = collect_ib(jobs=jobs)

    assert fake.most == jobs
    assert [p["lid"] for p in document["ports"]] == lids
    assert all(p["pkeys"] == ["0xffff", f"0x{0x8100 + p['lid']:04x}"] for p in document["ports"])


def test_a_failed_port_does_not_stop_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    lids = [1, 2, 3, 4, 5, 6, 7, 8]
    install(monkeypatch, BarrierTools(lids, 4, fail={2}, garbled={7}))
    progress = Recorder()

    document = collect_ib(jobs=4, progress=progress)

    by_lid = {p["lid"]: p for p in document["ports"]}
    assert by_lid[2] == {
        "guid": guid(2),
        "lid": 2,
        "error": "smpquery pkeys 2 exited 1: ibwarn: mad_rpc failed",
    }
    assert "pkeys" not in by_lid[7] and "unexpected smpquery pkeys output" in by_lid[7]["error"]
    assert all(by_lid[lid]["pkeys"] for lid in (1, 3, 4, 5, 6, 8))
    assert progress.total == 8
    assert sorted(r.lid for r in progress.reads) == lids
    assert {r.lid for r in progress.reads if not r.ok} == {2, 7}


def test_the_agents_all_or_nothing_read_still_raises_the_first_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(monkeypatch, BarrierTools([1, 2, 3, 4], 2, fail={3}, garbled=set()))
    ports = [(GUID0 + lid, lid) for lid in (1, 2, 3, 4)]

    with pytest.raises(CollectError, match="smpquery pkeys 3 exited 1"):
        read_pkey_tables(ports, concurrency=2)
    reads = read_ports(ports, concurrency=2)
    assert [r.ok for r in reads] == [True, True, False, True]


# --- the command, with tool scripts on PATH ----------------------------------------------------


def write_tools(directory: Path, lids: list[int], smpquery_cases: str = "") -> Path:
    """Scripts ``ibnetdiscover`` and ``smpquery``; `smpquery_cases` are extra ``case`` arms."""
    directory.mkdir(exist_ok=True)
    report = directory / "ports.txt"
    report.write_text(ca_report(lids))
    scripts = {
        "ibnetdiscover": f'[ "$1" = "-p" ] && exec cat {report}\necho "Switch 36 leaf01"\n',
        "smpquery": 'for lid; do :; done\ncase "$lid" in\n'
        f"{smpquery_cases}"
        '*) printf "   0: 0xffff 0x%04x 0x0000 0x0000\\n" $((0x8100 + lid))\n'
        '   echo "4 pkeys capacity for this port";;\nesac\n',
    }
    for name, body in scripts.items():
        path = directory / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return directory


OnPath = Callable[..., Path]


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OnPath:
    """Put fake tools first on PATH: ``on_path(lids, smpquery_cases)``."""

    def put(lids: list[int], cases: str = "") -> Path:
        tools = write_tools(tmp_path / "bin", lids, cases)
        monkeypatch.setenv("PATH", f"{tools}:{Path(sys.executable).parent}:/usr/bin:/bin")
        return tools

    return put


FAIL_3 = '3) echo "ibwarn: mad_rpc: _do_madrpc failed; dport (Lid 3)" >&2; exit 255;;\n'


def test_every_port_read_is_exit_0_with_the_summary(on_path: OnPath) -> None:
    on_path([1, 2, 3])

    result = runner.invoke(app, ["collect", "ib", "--jobs", "2"])

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert [p["pkeys"] for p in document["ports"]] == [
        ["0xffff", f"0x{0x8100 + lid:04x}"] for lid in (1, 2, 3)
    ]
    assert result.stderr == "read P_Key tables of 3 of 3 ports; 0 failed\n"


def test_a_failed_port_is_listed_reported_and_exit_3(on_path: OnPath, tmp_path: Path) -> None:
    on_path([1, 2, 3, 4], FAIL_3)
    out = tmp_path / "observed.json"

    result = runner.invoke(app, ["collect", "ib", "-j", "3", "--out", str(out)])

    assert result.exit_code == PARTIAL == 7
    ports = json.loads(out.read_text())["ports"]
    assert [("pkeys" in p, "error" in p) for p in ports] == [(True, False)] * 2 + [
        (False, True),
        (True, False),
    ]
    error = "smpquery -t 2000 pkeys 3 exited 255: ibwarn: mad_rpc: _do_madrpc failed; dport (Lid 3)"
    assert ports[2]["error"] == error
    # Not a TTY: no progress bar, only the failures and the summary.
    assert result.stderr.splitlines() == [
        f"failed: port {guid(3)} (LID 3): {error}",
        "read P_Key tables of 3 of 4 ports; 1 failed",
    ]


def test_a_hung_smpquery_times_out_and_the_rest_are_read(on_path: OnPath) -> None:
    on_path([1, 2], "2) exec sleep 60;;\n")

    document = collect_ib(timeout=1.0, jobs=2)

    first, hung = document["ports"]
    assert "pkeys" in first
    assert "timed out after 1.0 seconds" in hung["error"]


def test_no_topology_is_exit_2_without_a_document(on_path: OnPath) -> None:
    tools = on_path([1])
    (tools / "ibnetdiscover").write_text(
        "#!/bin/sh\necho 'ibwarn: umad_open_port failed' >&2\nexit 1\n"
    )

    result = runner.invoke(app, ["collect", "ib"])

    assert result.exit_code == TROUBLE
    assert result.stdout == ""
    assert result.stderr == "error: ibnetdiscover exited 1: ibwarn: umad_open_port failed\n"


@pytest.mark.parametrize("jobs", ["0", "-1", "257", "four"])
def test_jobs_out_of_range_is_a_usage_error(on_path: OnPath, jobs: str) -> None:
    on_path([1])

    result = runner.invoke(app, ["collect", "ib", "--jobs", jobs])

    assert result.exit_code == TROUBLE
    assert result.stdout == "" and "--jobs" in result.stderr


# --- progress ----------------------------------------------------------------------------------


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def run_command_on_terminal(monkeypatch: pytest.MonkeyPatch, out: Path, *, quiet: bool) -> str:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("TERM", "xterm-256color")
    with pytest.raises(typer.Exit) as stopped:
        collect_ib_command(out=out, m_key=None, jobs=2, quiet=quiet)
    assert stopped.value.exit_code == PARTIAL
    return terminal.getvalue()


def test_a_terminal_shows_the_progress_bar(
    on_path: OnPath, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    on_path([1, 2, 3], FAIL_3)

    shown = run_command_on_terminal(monkeypatch, tmp_path / "o.json", quiet=False)

    assert "smpquery pkeys" in shown and "3/3" in shown and "1 failed" in shown
    assert shown.endswith("read P_Key tables of 2 of 3 ports; 1 failed\n")


def test_quiet_hides_the_progress_bar_on_a_terminal(
    on_path: OnPath, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    on_path([1, 2, 3], FAIL_3)

    shown = run_command_on_terminal(monkeypatch, tmp_path / "o.json", quiet=True)

    assert "smpquery pkeys" not in shown and "\x1b" not in shown
    assert shown.splitlines()[-1] == "read P_Key tables of 2 of 3 ports; 1 failed"


def test_progress_that_is_not_shown_writes_nothing() -> None:
    stream = Terminal()
    with PortProgress(show=False, stream=stream) as progress:
        progress.begin(2)
        progress.advance(PortRead(1, 1, (0xFFFF,)))
        progress.advance(PortRead(2, 2, error="boom"))
    assert stream.getvalue() == ""
