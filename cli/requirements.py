"""The command line needs the service's packages: say so plainly when an agent host lacks them.

The base distribution installs the engine and the deploy agents only (``isofabric-agent``); the
`isofabric` command line drives the service and its database, which come with the `server`
extra. Without it the console script would die on an ImportError traceback.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec

SERVER_PACKAGES = ("fastapi", "sqlmodel", "sqlalchemy", "alembic", "uvicorn", "httpx2")


def require_server_packages() -> None:
    """Exit with status 2 and one line naming the missing packages, if any is missing."""
    missing = [name for name in SERVER_PACKAGES if find_spec(name) is None]
    if missing:
        sys.stderr.write(
            f"isofabric: the command line needs the service's packages ({', '.join(missing)} "
            "not installed): pip install 'isofabric[server]'; on a fabric host the deploy "
            "agents run as isofabric-agent\n"
        )
        raise SystemExit(2)
