"""A STAND-IN for SONiC's ``config`` and ``show`` commands (no SONiC here), for ``--gcu`` tests.

`install_standin` writes two executables, ``config`` and ``show``, into a directory the test puts
first on PATH. They record every call (one JSON array per line in ``calls.jsonl``) and act on a
CONFIG_DB in Redis (``ISOFABRIC_STANDIN_CONFIG_DB``, a redis-py URL), as GCU would, minus YANG:

* ``show runningconfiguration all``: the CONFIG_DB as JSON;
* ``config checkpoint NAME`` / ``rollback NAME`` / ``delete-checkpoint NAME``: a JSON file per
  checkpoint in the state directory; a rollback writes it back;
* ``config apply-patch [--dry-run] FILE``: the RFC 6902 patch applied with jsonpatch (a failed
  test op or a missing path exits 1, as GCU's simulation would);
* ``config save -y``: recorded only.

``ISOFABRIC_STANDIN_FAIL=<subcommand>`` makes that subcommand exit 1 (after recording the call);
``ISOFABRIC_STANDIN_DRIFT=KEY`` makes apply-patch also write ``KEY`` (``TABLE|key``) with a field
``drift``=``1``, as a daemon rewriting a key would (the read-back must catch it).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import jsonpatch

from agent.config_db import ConfigDb, RedisConfigDb, StoreError, touched

ROOT = Path(__file__).resolve().parents[2]
URL_ENV = "ISOFABRIC_STANDIN_CONFIG_DB"
STATE_ENV = "ISOFABRIC_STANDIN_STATE"
FAIL_ENV = "ISOFABRIC_STANDIN_FAIL"
DRIFT_ENV = "ISOFABRIC_STANDIN_DRIFT"
SCRIPT = """#!{python}
import sys
sys.path.insert(0, {root!r})
from tests.agent.gcu_standin import main
sys.exit(main({name!r}, sys.argv[1:]))
"""


def install_standin(bin_dir: Path, state_dir: Path, config_db_url: str) -> dict[str, str]:
    """Write the stand-in ``config`` and ``show``; the environment variables that drive them."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    for name in ("config", "show"):
        path = bin_dir / name
        path.write_text(SCRIPT.format(python=sys.executable, root=str(ROOT), name=name))
        path.chmod(0o755)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        URL_ENV: config_db_url,
        STATE_ENV: str(state_dir),
    }


def calls(state_dir: Path) -> list[list[str]]:
    """Every recorded call, oldest first."""
    log = state_dir / "calls.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def run_in_process(argv: list[str]) -> str:
    """Run the stand-in in this process (a `GcuConfigDb` runner; no interpreter start per call)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(Path(argv[0]).name, argv[1:])
    if status:
        raise StoreError(f"{' '.join(argv)} exited {status}:\n{err.getvalue()}")
    return out.getvalue()


def main(name: str, args: list[str]) -> int:
    state = Path(os.environ[STATE_ENV])
    with (state / "calls.jsonl").open("a") as log:
        log.write(json.dumps([name, *args]) + "\n")
    if args and os.environ.get(FAIL_ENV) == args[0]:
        print(f"stand-in: {args[0]} fails as asked", file=sys.stderr)
        return 1
    store = RedisConfigDb.from_url(os.environ[URL_ENV])
    try:
        if name == "show":
            print(json.dumps(store.read(), indent=2, sort_keys=True))
            return 0
        return _config(store, state, args)
    except (StoreError, jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        print(f"stand-in: {error}", file=sys.stderr)
        return 1


def _config(store: RedisConfigDb, state: Path, args: list[str]) -> int:
    command, rest = args[0], args[1:]
    if command == "checkpoint":
        (state / f"{rest[0]}.cp.json").write_text(json.dumps(store.read()))
    elif command == "delete-checkpoint":
        (state / f"{rest[0]}.cp.json").unlink()
    elif command == "rollback":
        _replace(store, json.loads((state / f"{rest[0]}.cp.json").read_text()))
    elif command == "apply-patch":
        patch = json.loads(Path(rest[-1]).read_text())
        intended = jsonpatch.apply_patch(store.read(), patch)
        if "--dry-run" not in rest:
            _replace(store, intended)
            _drift(store)
    return 0


def _replace(store: RedisConfigDb, document: ConfigDb) -> None:
    store.write(*touched(store.read(), document))


def _drift(store: RedisConfigDb) -> None:
    key = os.environ.get(DRIFT_ENV)
    if key:
        store.client.hset(key, "drift", "1")
