"""``isofabric collect ib --jobs 6`` on ibsim with one port's smpquery failing (issue 14, item 7).

The command runs as an SM host runs it: a subprocess without the umad2sim preload, whose
``ibnetdiscover`` and ``smpquery`` are wrappers first on PATH that attach to ibsim. The
``smpquery`` wrapper fails for one tenant port's LID and runs the real tool otherwise, counting
how many run at once. The other ports are read, the failure is reported on stderr with the
summary line, the exit status is 7 (partial), and the observation the service makes of the
document reports the failed port as not observed, not as a port without P_Keys.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cli.collect import PARTIAL
from tests.builders import LOCAL_URL
from tests.docs.examples import host_argv, in_lab
from tests.keys import keys_create

from .conftest import FabricFactory, OpenSMFactory
from .harness import OpenSM, SimFabric
from .test_opensm_end_to_end import (
    FABRIC,
    Api,
    fetch_artifacts,
    ingest_fabric,
    onboard_tenants,
    ports_of,
)

pytestmark = pytest.mark.conformance

REPO_ROOT = Path(__file__).resolve().parents[2]
JOBS = 6  # OpenSM and 6 smpquery: within the 10 clients ibsim serves
COLLECT_TIMEOUT = 180.0
FAILING_SMPQUERY = """#!/bin/sh
{exports}
for lid; do :; done
if [ "$lid" = "{bad_lid}" ]; then
    echo "ibwarn: injected: no reply from LID $lid" >&2
    exit 1
fi
touch {running}/$$
ls {running} | wc -l >> {counts}
{tool} "$@"
status=$?
rm -f {running}/$$
exit $status
"""


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    monkeypatch.setenv("ISOFABRIC_DATABASE_URL", f"sqlite:///{tmp_path / 'isofabric.db'}")
    keys_create(f"sqlite:///{tmp_path / 'isofabric.db'}")  # the OpenSM secret opensm.conf needs
    from api.app import create_app

    with TestClient(
        create_app(), client=("127.0.0.1", 50000), base_url=LOCAL_URL
    ) as client:  # open mode: loopback
        yield Api(client)


def write_wrappers(fabric: SimFabric, bin_dir: Path, bad_lid: int) -> None:
    """``ibnetdiscover`` and a ``smpquery`` that fails for `bad_lid`, both attached to ibsim."""
    env = fabric.client_env()
    exports = "\n".join(
        f"export {k}={shlex.quote(env[k])}" for k in ("LD_PRELOAD", "IBSIM_SOCKNAME", "SIM_HOST")
    )
    running = bin_dir / "running"
    running.mkdir(parents=True)
    scripts = {
        "ibnetdiscover": f'#!/bin/sh\n{exports}\nexec {fabric.tools.ibnetdiscover} "$@"\n',
        "smpquery": FAILING_SMPQUERY.format(
            exports=exports,
            bad_lid=bad_lid,
            running=shlex.quote(str(running)),
            counts=shlex.quote(str(bin_dir / "counts")),
            tool=shlex.quote(fabric.tools.smpquery),
        ),
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)


def collect(bin_dir: Path, workdir: Path, m_key: int | None) -> subprocess.CompletedProcess[str]:
    """docs/auditors.md's ``collect ib`` line (``sh {.host #collect-ib}``) as a subprocess, with
    ``--jobs 6``; stderr is a pipe (no progress bar)."""
    env = {k: v for k, v in os.environ.items() if k not in {"LD_PRELOAD", "ISOFABRIC_M_KEY"}}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{REPO_ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"
    if m_key:
        env["ISOFABRIC_M_KEY"] = hex(m_key)
    documented = host_argv("docs/auditors.md", "collect-ib")[0]
    options = {"--jobs": str(JOBS), "--out": str(workdir / "observed.json")}
    argv = [sys.executable, "-c", "from cli import main; main()", *in_lab(documented, options)[1:]]
    return subprocess.run(
        argv,
        env=env,
        cwd=workdir,  # libumad2sim writes its fake sysfs in the working directory
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COLLECT_TIMEOUT,
        check=False,
    )


def test_collect_with_six_jobs_reads_every_port_but_the_failing_one(
    api: Api,
    sim_fabric_factory: FabricFactory,
    opensm_factory: OpenSMFactory,
    tmp_path: Path,
) -> None:
    fabric = sim_fabric_factory()
    ingest_fabric(api, fabric.ibnetdiscover())
    onboard_tenants(api)
    files = fetch_artifacts(api)
    sm = opensm_factory(
        fabric,
        opensm_conf=files[OpenSM.OPTIONS],
        partitions_conf=files[OpenSM.PARTITIONS],
        qos_policy_conf=files[OpenSM.QOS_POLICY],
    )
    lids = {port.guid: port.lid for port in fabric.ca_ports()}
    victim = min(ports_of(api, "globex"))
    write_wrappers(fabric, tmp_path / "bin", bad_lid=lids[victim])

    done = collect(tmp_path / "bin", tmp_path, sm.keys.m_key)

    assert done.returncode == PARTIAL, done.stderr
    ports = json.loads((tmp_path / "observed.json").read_text())["ports"]
    assert {int(p["guid"], 16) for p in ports} == set(lids)
    [failed] = [p for p in ports if "error" in p]
    assert int(failed["guid"], 16) == victim and "pkeys" not in failed
    assert failed["error"].endswith(f"exited 1: ibwarn: injected: no reply from LID {lids[victim]}")
    assert all(p["pkeys"] for p in ports if p is not failed)
    assert done.stderr.splitlines() == [
        f"failed: port {failed['guid']} (LID {lids[victim]}): {failed['error']}",
        f"read P_Key tables of {len(lids) - 1} of {len(lids)} ports; 1 failed",
    ]
    counts = [int(n) for n in (tmp_path / "bin" / "counts").read_text().split()]
    assert len(counts) == len(lids) - 1 and max(counts) <= JOBS

    report = api.call(
        "POST",
        f"/v1/fabrics/{FABRIC}/observations",
        json=json.loads((tmp_path / "observed.json").read_text()),
    )

    assert report["holds"] is True and report["ports"] == []  # no "missing" drift for it
    assert [u["guid"] for u in report["unobserved"]] == [failed["guid"]]
