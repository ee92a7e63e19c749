"""Runtime settings, read from ``ISOFABRIC_*`` environment variables (12-factor style)."""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_DATABASE_URL = "sqlite:///./isofabric.db"
DEFAULT_QUARANTINE_SECONDS = 24 * 3600
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
# C2SP checkpoint origin (and signing key name): unique per log, no spaces.
DEFAULT_AUDIT_ORIGIN = "isofabric.local/audit"


@dataclass(frozen=True, slots=True)
class Settings:
    """Every knob the service reads; see README "Configuration"."""

    database_url: str = DEFAULT_DATABASE_URL
    admin_token: str | None = None
    pkey_quarantine_seconds: int = DEFAULT_QUARANTINE_SECONDS
    opensm_m_key: int | None = None
    opensm_sm_key: int | None = None
    opensm_sa_key: int | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    audit_origin: str = DEFAULT_AUDIT_ORIGIN

    def __repr__(self) -> str:
        # Tokens and subnet keys must never reach a log line.
        return f"Settings(database_url={_redact_url(self.database_url)!r}, ...)"


def _redact_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.split("@", 1)[1]
    return scheme + sep + rest


def _int_env(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return int(raw, 0)


def load_settings() -> Settings:
    """Read the settings from the environment; unset variables take their defaults."""
    quarantine = _int_env("ISOFABRIC_PKEY_QUARANTINE_SECONDS", DEFAULT_QUARANTINE_SECONDS)
    max_body = _int_env("ISOFABRIC_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)
    return Settings(
        database_url=os.environ.get("ISOFABRIC_DATABASE_URL") or DEFAULT_DATABASE_URL,
        admin_token=os.environ.get("ISOFABRIC_ADMIN_TOKEN") or None,
        pkey_quarantine_seconds=quarantine if quarantine is not None else 0,
        opensm_m_key=_int_env("ISOFABRIC_OPENSM_M_KEY", None),
        opensm_sm_key=_int_env("ISOFABRIC_OPENSM_SM_KEY", None),
        opensm_sa_key=_int_env("ISOFABRIC_OPENSM_SA_KEY", None),
        max_body_bytes=max_body if max_body is not None else DEFAULT_MAX_BODY_BYTES,
        audit_origin=os.environ.get("ISOFABRIC_AUDIT_ORIGIN") or DEFAULT_AUDIT_ORIGIN,
    )
