"""Runtime settings, read from ``ISOFABRIC_*`` environment variables (12-factor style)."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

DEFAULT_DATABASE_URL = "sqlite:///./isofabric.db"
DEFAULT_QUARANTINE_SECONDS = 24 * 3600
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
# How long an Idempotency-Key is honoured; the API promises at least a day.
MIN_IDEMPOTENCY_TTL_HOURS = 24
# Heavy requests (topology imports, config audits, observations, proofs) one principal may
# have in flight at once; more are refused with 429 (api/limits.py).
DEFAULT_HEAVY_CONCURRENCY = 2
# Worker processes that run heavy requests' parsing and verification (api/heavy_processes.py):
# one principal's two heavy requests at once, each on a core of its own.
DEFAULT_HEAVY_PROCESSES = 2
# Snapshots whose artifact bytes stay fetchable per fabric (besides each deploy target's current
# one): the most recently fetched ones (tenancy/usecases/snapshot_history.py).
DEFAULT_SNAPSHOT_RETAIN = 20
# Snapshots whose artifact bytes stay fetchable per fabric because an isolation proof names them:
# the ones most recently proven, so a verifier can fetch a proof's subjects after the fabric moved
# on (tenancy/usecases/snapshot_history.py). The proofs of one state count once.
DEFAULT_PROOF_RETAIN = 100
DEFAULT_FULL_VERIFY_INTERVAL_SECONDS = 3600
# A signed checkpoint of the audit log whenever it grew, at most this long after.
DEFAULT_CHECKPOINT_INTERVAL_SECONDS = 300
MAX_JOB_INTERVAL_SECONDS = 7 * 24 * 3600
# Who may read /metrics (it names every fabric): a token allowed by the RBAC policy, or anyone.
METRICS_ACCESS_MODES = ("authenticated", "open")
OFF_WORDS = ("0", "off", "false", "no")
# C2SP checkpoint origin (and signing key name): unique per log, no spaces.
DEFAULT_AUDIT_ORIGIN = "isofabric.local/audit"
# Next to a SQLite database file ``<dir>/<stem>.db`` the key files default to
# ``<dir>/<stem><suffix>``: ./isofabric.db -> ./isofabric-signing.key, and so on.
SIGNING_KEY_SUFFIX = "-signing.key"
KEYRING_SUFFIX = "-keyring.jsonl"
OPENSM_SECRET_SUFFIX = "-opensm.secret"
EPOCH_SUFFIX = "-epoch"


@dataclass(frozen=True, slots=True)
class Settings:
    """Every knob the service reads; see docs/operators/deployment.md, "Configuration".

    The signing key, the keyring and the OpenSM secret live in files outside the database (a
    database writer must not be able to sign); unset, each defaults to a file next to a SQLite
    database file (`signing_key_path`, `keyring_path`, `opensm_secret_path`).
    """

    database_url: str = DEFAULT_DATABASE_URL
    admin_token: str | None = None
    pkey_quarantine_seconds: int = DEFAULT_QUARANTINE_SECONDS
    opensm_m_key: int | None = None
    opensm_sm_key: int | None = None
    opensm_sa_key: int | None = None
    # The fabric an operator token acts on under the UFM-compatible API's fabric-less paths.
    ufm_fabric: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    idempotency_ttl_hours: int = MIN_IDEMPOTENCY_TTL_HOURS
    heavy_concurrency: int = DEFAULT_HEAVY_CONCURRENCY
    # Worker processes for heavy requests (api/heavy_processes.py). load_settings:
    # ISOFABRIC_HEAVY_PROCESSES, default 2; 0 for Settings built in code, so that the many apps
    # a test session builds start no processes (their heavy requests run in worker threads).
    heavy_processes: int = 0
    snapshot_retain: int = DEFAULT_SNAPSHOT_RETAIN
    proof_retain: int = DEFAULT_PROOF_RETAIN
    audit_origin: str = DEFAULT_AUDIT_ORIGIN
    signing_key_file: str | None = None
    signing_key_pem: str | None = None
    keyring_file: str | None = None
    opensm_secret_file: str | None = None
    opensm_secret: str | None = None
    epoch_file: str | None = None
    # Seconds between full re-verifications of every fabric by `serve` (0: never).
    full_verify_interval_seconds: int = DEFAULT_FULL_VERIFY_INTERVAL_SECONDS
    # Seconds between scheduled audit-log checkpoints by `serve` (0: never).
    checkpoint_interval_seconds: int = DEFAULT_CHECKPOINT_INTERVAL_SECONDS
    metrics_access: str = METRICS_ACCESS_MODES[0]
    # Peers (addresses, networks, or "*") whose X-Forwarded-Proto says the client's scheme: a
    # TLS-terminating proxy in front of `serve`. The scheme only: the client address stays the
    # TCP peer (open mode trusts loopback peers, api/auth.py).
    forwarded_allow_ips: tuple[str, ...] = ()
    # Tests: the gate also verifies the whole fabric and fails if the incremental verdict differs.
    verify_cross_check: bool = False
    # Compute a changed fabric's whole verdict in the background (api/verdict_warmer.py). On for
    # the service (load_settings: ISOFABRIC_VERDICT_WARM, default on); off for Settings built in
    # code, so that the many apps a test session builds start no warming threads.
    verdict_warm: bool = False

    def __repr__(self) -> str:
        # Tokens, the signing key and subnet keys must never reach a log line.
        return f"Settings(database_url={_redact_url(self.database_url)!r}, ...)"

    @property
    def signing_key_path(self) -> Path | None:
        """The private signing key's file (PEM, mode 0600); None when none can be named."""
        return _configured_or_beside_db(
            self.signing_key_file, self.database_url, SIGNING_KEY_SUFFIX
        )

    @property
    def keyring_path(self) -> Path | None:
        """The public keyring file verifiers trust (JSON Lines, one key per line)."""
        return _configured_or_beside_db(self.keyring_file, self.database_url, KEYRING_SUFFIX)

    @property
    def epoch_path(self) -> Path | None:
        """The file holding the manifest epoch (tenancy/store/epoch.py): beside the key files.

        Unset, it sits beside a SQLite database file, else beside the keyring file (PostgreSQL
        deployments name the keyring); None when neither can be named.
        """
        beside_db = _configured_or_beside_db(self.epoch_file, self.database_url, EPOCH_SUFFIX)
        keyring = self.keyring_path
        if beside_db is None and keyring is not None:
            return keyring.with_name(keyring.stem + EPOCH_SUFFIX)
        return beside_db

    @property
    def opensm_secret_path(self) -> Path | None:
        """The file holding the secret the OpenSM keys derive from (hex, mode 0600)."""
        return _configured_or_beside_db(
            self.opensm_secret_file, self.database_url, OPENSM_SECRET_SUFFIX
        )


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite database URL; None for in-memory SQLite and other databases."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):
        return None  # a URI filename (e.g. shared memory): no plain file to sit next to
    return Path(database)


def shared_between_processes(url: str) -> bool:
    """Whether another process opening `url` reaches the same database (not in-memory SQLite)."""
    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError:
        return False
    return backend != "sqlite" or sqlite_file(url) is not None


def _configured_or_beside_db(configured: str | None, url: str, suffix: str) -> Path | None:
    if configured:
        return Path(configured)
    database = sqlite_file(url)
    if database is None:
        # In memory or PostgreSQL: there is no directory the operator chose; they name the file.
        return None
    return database.with_name(database.stem + suffix)


def _redact_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.split("@", 1)[1]
    return scheme + sep + rest


def _int_env(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw, 0)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {raw.strip()[:40]!r}") from None


def _positive_env(name: str, default: int) -> int:
    value = _int_env(name, default)
    if value is None or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, not {value}")
    return value


def _count_env(name: str, default: int) -> int:
    value = _int_env(name, default)
    if value is None or value < 0:
        raise ValueError(f"{name} must be a whole number of at least 0 (off), not {value}")
    return value


def _interval_env(name: str, default: int) -> int:
    # A scheduled job's period (tenancy/usecases/scheduler.py): 0 turns it off; a week at most, as a
    # longer one (a value in milliseconds, say) would silently mean "never" (the 0 spelled out).
    value = _int_env(name, default)
    if value is None or not 0 <= value <= MAX_JOB_INTERVAL_SECONDS:
        raise ValueError(
            f"{name} must be a whole number of seconds from 0 (off) to "
            f"{MAX_JOB_INTERVAL_SECONDS} (a week), not {value}"
        )
    return value


def _idempotency_ttl_hours() -> int:
    name = "ISOFABRIC_IDEMPOTENCY_TTL_HOURS"
    hours = _int_env(name, MIN_IDEMPOTENCY_TTL_HOURS)
    if hours is None or hours < MIN_IDEMPOTENCY_TTL_HOURS:
        # Clients may retry for a day on the API's word; a shorter TTL would run such retries again.
        raise ValueError(f"{name} must be at least {MIN_IDEMPOTENCY_TTL_HOURS}, not {hours}")
    return hours


def load_settings() -> Settings:
    """Read the settings from the environment; unset variables take their defaults."""
    quarantine = _int_env("ISOFABRIC_PKEY_QUARANTINE_SECONDS", DEFAULT_QUARANTINE_SECONDS)
    max_body = _int_env("ISOFABRIC_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)
    env = os.environ.get
    return Settings(
        database_url=env("ISOFABRIC_DATABASE_URL") or DEFAULT_DATABASE_URL,
        admin_token=env("ISOFABRIC_ADMIN_TOKEN") or None,
        pkey_quarantine_seconds=quarantine if quarantine is not None else 0,
        opensm_m_key=_int_env("ISOFABRIC_OPENSM_M_KEY", None),
        opensm_sm_key=_int_env("ISOFABRIC_OPENSM_SM_KEY", None),
        opensm_sa_key=_int_env("ISOFABRIC_OPENSM_SA_KEY", None),
        ufm_fabric=env("ISOFABRIC_UFM_FABRIC") or None,
        max_body_bytes=max_body if max_body is not None else DEFAULT_MAX_BODY_BYTES,
        idempotency_ttl_hours=_idempotency_ttl_hours(),
        heavy_concurrency=_positive_env("ISOFABRIC_HEAVY_CONCURRENCY", DEFAULT_HEAVY_CONCURRENCY),
        heavy_processes=_count_env("ISOFABRIC_HEAVY_PROCESSES", DEFAULT_HEAVY_PROCESSES),
        snapshot_retain=_positive_env("ISOFABRIC_SNAPSHOT_RETAIN", DEFAULT_SNAPSHOT_RETAIN),
        proof_retain=_positive_env("ISOFABRIC_PROOF_RETAIN", DEFAULT_PROOF_RETAIN),
        audit_origin=env("ISOFABRIC_AUDIT_ORIGIN") or DEFAULT_AUDIT_ORIGIN,
        signing_key_file=env("ISOFABRIC_SIGNING_KEY_FILE") or None,
        signing_key_pem=env("ISOFABRIC_SIGNING_KEY") or None,
        keyring_file=env("ISOFABRIC_KEYRING_FILE") or None,
        epoch_file=env("ISOFABRIC_EPOCH_FILE") or None,
        opensm_secret_file=env("ISOFABRIC_OPENSM_SECRET_FILE") or None,
        opensm_secret=env("ISOFABRIC_OPENSM_SECRET") or None,
        full_verify_interval_seconds=_interval_env(
            "ISOFABRIC_FULL_VERIFY_INTERVAL_SECONDS", DEFAULT_FULL_VERIFY_INTERVAL_SECONDS
        ),
        checkpoint_interval_seconds=_interval_env(
            "ISOFABRIC_CHECKPOINT_INTERVAL_SECONDS", DEFAULT_CHECKPOINT_INTERVAL_SECONDS
        ),
        verify_cross_check=env("ISOFABRIC_VERIFY_CROSS_CHECK", "").strip() in ("1", "true"),
        metrics_access=_metrics_access(),
        forwarded_allow_ips=forwarded_allow_ips(env("ISOFABRIC_FORWARDED_ALLOW_IPS", "")),
        verdict_warm=env("ISOFABRIC_VERDICT_WARM", "1").strip().lower() not in OFF_WORDS,
    )


def forwarded_allow_ips(text: str) -> tuple[str, ...]:
    """The trusted proxies of a comma-separated list: addresses, networks, or "*" for any.

    Raises:
        ValueError: an entry is neither an address, a network nor "*".
    """
    entries = tuple(part.strip() for part in text.split(",") if part.strip())
    for entry in entries:
        if entry != "*":
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as error:
                raise ValueError(
                    f"ISOFABRIC_FORWARDED_ALLOW_IPS: {entry!r} is not an IP address, a network "
                    "such as 10.0.0.0/8, or '*'"
                ) from error
    return entries


def _metrics_access() -> str:
    value = (os.environ.get("ISOFABRIC_METRICS_ACCESS") or METRICS_ACCESS_MODES[0]).strip().lower()
    if value not in METRICS_ACCESS_MODES:
        raise ValueError(f"ISOFABRIC_METRICS_ACCESS must be authenticated or open, not {value!r}")
    return value
