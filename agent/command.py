"""`isofabric-agent opensm|sonic`: the deploy agents' commands.

The console script of the base distribution (an SM host or a switch installs nothing of the
service). It imports only the agent, typer and the engine (about 0.2 s to start, where the whole
command line takes 2 s). Two shims run the same commands: ``isofabric agent …`` in the full
command line (cli/agent.py) and ``python -m api.agent …`` (api/agent/__main__.py), kept for
units written before this script existed.

Exit statuses with ``--once``: 0 when the cycle applied the snapshot or had nothing to do, 1 for
any other outcome (refused, failed, rolled back, restart required, server unreachable: one line
on stderr says which), 2 for a usage error (an option out of range, a missing key file or conf
dir). ``--plan`` exits 0 when the snapshot could be applied, 1 when it would be refused. The loop
(``--interval``) runs until stopped. ``agent sonic`` (a RoCE leaf: CONFIG_DB and FRR,
agent/sonic.py) exits the same way: 0 applied or nothing to do, 1 otherwise (also while
``sync`` does not yet desire the signed manifest), 2 for a usage error.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # the agents import their modules when run (a fast start)
    from agent.client import ServerClient
    from agent.sonic import SonicAgent, SonicSettings

agent_app = typer.Typer(help="Deploy agents run on fabric hosts.", no_args_is_help=True)

# smpquery processes at once. ibsim serves at most 10 clients in all (the SMs, the agent's
# smpquery processes, an ibnetdiscover), and on a real fabric each smpquery is a stream of MADs
# the SM host's HCA sends to one port's SMA: more than 10 at once gains little and makes MAD
# timeouts (a failed read-back) likelier. DEFAULT_CONCURRENCY (4) leaves room for the SMs.
MAX_CONCURRENCY = 10


def _token(ctx: typer.Context, token: str | None, token_file: Path | None) -> str | None:
    """The agent token from --token-file, ISOFABRIC_TOKEN or (warned about) --token."""
    if token is not None and token_file is not None:
        raise typer.BadParameter("give one of --token and --token-file", param_hint="--token")
    if token_file is not None:
        try:
            text = token_file.read_text().strip()
        except (OSError, UnicodeDecodeError) as error:
            raise typer.BadParameter(str(error), param_hint="--token-file") from error
        if not text:
            raise typer.BadParameter(f"{token_file} is empty", param_hint="--token-file")
        return text
    source = ctx.get_parameter_source("token")  # click's ParameterSource (typer vendors it)
    if token is not None and source is not None and source.name == "COMMANDLINE":
        _say("warning: --token on the command line shows in process lists; use --token-file")
    return token


@agent_app.callback()
def agent_group() -> None:
    """Deploy agents run on fabric hosts (a group, also when run as ``python -m api.agent``)."""


def _say(line: str) -> None:
    typer.echo(f"isofabric-agent: {line}", err=True)


def _positive(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise typer.BadParameter(f"{value:g} is not greater than 0")
    return value


# The options both agents take.
ServerOption = Annotated[str, typer.Option("--server", help="The service's base URL")]
FabricOption = Annotated[str, typer.Option("--fabric", help="Fabric name")]
PublicKeyOption = Annotated[
    Path,
    typer.Option(
        "--public-key",
        help="Pinned Ed25519 public key PEM, or a keyring",
        exists=True,
        dir_okay=False,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="ISOFABRIC_TOKEN",
        help="Agent token (the environment's ISOFABRIC_TOKEN, or --token-file: a token on the "
        "command line shows in every process list)",
    ),
]
TokenFileOption = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        envvar="ISOFABRIC_TOKEN_FILE",
        help="File holding the agent token (e.g. 0600, or a systemd credential)",
        exists=True,
        dir_okay=False,
    ),
]
OnceOption = Annotated[bool, typer.Option("--once", help="Run one cycle and exit")]
IntervalOption = Annotated[
    float | None,
    typer.Option("--interval", help="Seconds between cycles (loop)", callback=_positive),
]


# The OpenSM agent's own options.
TargetOption = Annotated[str, typer.Option("--target", help="This SM host's target name")]
ConfDirOption = Annotated[
    Path,
    typer.Option("--conf-dir", help="Where OpenSM reads its files", exists=True, file_okay=False),
]
LogFileOption = Annotated[Path, typer.Option("--log-file", help="OpenSM's log file")]
PidFileOption = Annotated[Path | None, typer.Option("--pid-file", help="OpenSM's pid file")]
SystemdUnitOption = Annotated[
    str | None, typer.Option("--systemd-unit", help="OpenSM's unit, e.g. opensm@0x1234")
]
MinIntervalOption = Annotated[
    float, typer.Option("--min-interval", help="At most one apply per this many seconds", min=0)
]
PlanOption = Annotated[bool, typer.Option("--plan", help="Print what would change; do nothing")]
FullOption = Annotated[bool, typer.Option("--full", help="Read back every CA port")]
SampleOption = Annotated[int, typer.Option("--sample", help="Unchanged ports read back", min=0)]
SweepTimeoutOption = Annotated[
    float, typer.Option("--sweep-timeout", help="Seconds to wait for SUBNET UP", callback=_positive)
]
ConcurrencyOption = Annotated[
    int,
    typer.Option("--concurrency", help="smpquery processes at once", min=1, max=MAX_CONCURRENCY),
]


@agent_app.command("opensm")
def opensm(
    server: ServerOption,
    fabric: FabricOption,
    target: TargetOption,
    conf_dir: ConfDirOption,
    public_key: PublicKeyOption,
    log_file: LogFileOption,
    ctx: typer.Context,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    pid_file: PidFileOption = None,
    systemd_unit: SystemdUnitOption = None,
    once: OnceOption = False,
    interval: IntervalOption = None,
    min_interval: MinIntervalOption = 5.0,
    plan: PlanOption = False,
    full: FullOption = False,
    sample: SampleOption = 16,
    sweep_timeout: SweepTimeoutOption = 60.0,
    concurrency: ConcurrencyOption = 4,
) -> None:
    """Deploy the fabric's signed OpenSM files on this host, verify them, report the outcome."""
    from agent.client import ServerClient
    from agent.cycle import AgentSettings
    from agent.loop import run_loop
    from agent.manifest import ManifestError
    from agent.opensm import Agent
    from agent.plan import plan as print_plan
    from agent.sm import LocalSmHost, SmLocator, SmLog
    from agent.trust import Trust

    if (pid_file is None) == (systemd_unit is None):
        raise typer.BadParameter("give exactly one of --pid-file and --systemd-unit")
    if not plan and once == (interval is not None):
        raise typer.BadParameter("give exactly one of --once and --interval SECONDS")
    try:
        keys = Trust.load(public_key)
    except (ManifestError, OSError) as error:  # OSError: e.g. not readable
        raise typer.BadParameter(str(error), param_hint="--public-key") from error
    settings = AgentSettings(conf_dir, fabric, keys, full, sample, sweep_timeout, min_interval)
    client = ServerClient(server, _token(ctx, token, token_file), fabric, target)
    if plan:
        raise typer.Exit(print_plan(settings, client, typer.echo))
    locator = SmLocator(pid_file=pid_file, unit=systemd_unit)
    host = LocalSmHost(locator, SmLog(log_file), concurrency=concurrency)
    agent = Agent(settings, client, host, say=_say)
    if once:
        raise typer.Exit(0 if agent.cycle().ok else 1)
    assert interval is not None
    run_loop(agent, interval)


DEFAULT_STATE_DIR = Path("/var/lib/isofabric/agent-sonic")


@agent_app.command("sonic")
def sonic(
    server: ServerOption,
    fabric: FabricOption,
    target: Annotated[str, typer.Option("--target", help="This leaf's target name")],
    public_key: PublicKeyOption,
    ctx: typer.Context,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    config_db: Annotated[
        str | None,
        typer.Option("--config-db", help="CONFIG_DB in Redis: redis://HOST:PORT/4, unix:///…?db=4"),
    ] = None,
    gcu: Annotated[
        bool, typer.Option("--gcu", help="Change CONFIG_DB with SONiC's config apply-patch")
    ] = False,
    frr_conf: Annotated[
        Path | None, typer.Option("--frr-conf", help="The leaf's frr.conf (deploy FRR too)")
    ] = None,
    once: OnceOption = False,
    interval: IntervalOption = None,
    allow_disruptive: Annotated[
        bool,
        typer.Option("--allow-disruptive", help="Apply changes to declared (fabric-wide) keys"),
    ] = False,
    bootstrap: Annotated[
        bool,
        typer.Option(
            "--bootstrap",
            help="First deployment: apply the declared keys too, until this leaf has applied a "
            "snapshot (its --state-dir says so)",
        ),
    ] = False,
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="Where the agent keeps its state", file_okay=False)
    ] = DEFAULT_STATE_DIR,
    frr_pathspace: Annotated[
        str | None, typer.Option("--frr-pathspace", help="FRR pathspace (-N) of the daemons")
    ] = None,
    frr_reload: Annotated[
        str, typer.Option("--frr-reload", help="frr-reload.py")
    ] = "/usr/lib/frr/frr-reload.py",
    vtysh: Annotated[str, typer.Option("--vtysh", help="vtysh")] = "vtysh",
) -> None:
    """Deploy this leaf's signed CONFIG_DB and frr.conf, phase by phase, verified, reported."""
    from agent.client import ServerClient
    from agent.loop import run_loop

    if once == (interval is not None):
        raise typer.BadParameter("give exactly one of --once and --interval SECONDS")
    if (config_db is None) == (not gcu):
        raise typer.BadParameter("give exactly one of --config-db URL and --gcu")
    agent = _sonic_agent(
        ServerClient(server, _token(ctx, token, token_file), fabric, target),
        _sonic_settings(fabric, target, public_key, state_dir, (allow_disruptive, bootstrap)),
        config_db,
        frr_conf,
        (frr_reload, vtysh, frr_pathspace),
    )
    if once:
        raise typer.Exit(0 if agent.cycle().ok else 1)
    assert interval is not None
    run_loop(agent, interval)


def _sonic_settings(
    fabric: str, leaf: str, public_key: Path, state_dir: Path, disruptive: tuple[bool, bool]
) -> SonicSettings:
    """The settings; `disruptive` is (--allow-disruptive, --bootstrap)."""
    from agent.manifest import ManifestError
    from agent.sonic import SonicSettings
    from agent.trust import Trust

    try:
        keys = Trust.load(public_key)
    except (ManifestError, OSError) as error:
        raise typer.BadParameter(str(error), param_hint="--public-key") from error
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise typer.BadParameter(str(error), param_hint="--state-dir") from error
    allow_disruptive, bootstrap = disruptive
    return SonicSettings(fabric, leaf, keys, state_dir, allow_disruptive, bootstrap)


def _sonic_agent(
    client: ServerClient,
    settings: SonicSettings,
    config_db: str | None,
    frr_conf: Path | None,
    frr_tools: tuple[str, str, str | None],
) -> SonicAgent:
    from agent.config_db import RedisConfigDb
    from agent.frr import FrrLeaf, FrrTools
    from agent.gcu import GcuConfigDb
    from agent.sonic import LeafStore, SonicAgent

    store: LeafStore
    try:
        store = RedisConfigDb.from_url(config_db) if config_db is not None else GcuConfigDb()
    except ValueError as error:  # redis-py: an unsupported URL scheme
        raise typer.BadParameter(str(error), param_hint="--config-db") from error
    frr = FrrLeaf(frr_conf, FrrTools(*frr_tools)) if frr_conf is not None else None
    return SonicAgent(settings, client, store, frr, say=_say)
