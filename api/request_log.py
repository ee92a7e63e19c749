"""Logs: one structured line per request, and the text or JSON format of every log record.

Each answered request logs one record on the ``isofabric.request`` logger (api/request_observer.py
calls `log_request`) with its method, route template, status, duration in milliseconds, principal
id and request id as fields. `isofabric serve --log-format json` (or ISOFABRIC_LOG_FORMAT=json)
writes every record, the service's and uvicorn's, as one JSON object per line (`JsonFormatter`);
``text`` (the default) as one readable line. Ours is the access log: uvicorn's is turned off.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

REQUEST_LOGGER = "isofabric.request"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
request_log = logging.getLogger(REQUEST_LOGGER)


class LogFormat(StrEnum):
    """How `serve` writes log records."""

    TEXT = "text"
    JSON = "json"


@dataclass(frozen=True, slots=True)
class RequestFields:
    """What the request line carries (the JSON object's members besides time, level, etc.)."""

    method: str
    route: str
    status: int
    duration_ms: float
    principal: str | None
    request_id: str | None


def log_request(fields: RequestFields) -> None:
    """Log the request's line: INFO, or WARNING for a 5xx (its trace is logged apart)."""
    level = logging.WARNING if fields.status >= 500 else logging.INFO
    if not request_log.isEnabledFor(level):
        return
    request_log.log(
        level,
        "%s %s %d %.1f ms principal=%s request_id=%s",
        fields.method,
        fields.route,
        fields.status,
        fields.duration_ms,
        fields.principal or "-",
        fields.request_id or "-",
        extra=asdict(fields),
    )


# What every LogRecord has: anything else on a record came from ``extra=`` and is a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's colourised copy of the message
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (RFC 3339 UTC), level, logger, message, extra fields.

    A record's exception, if any, is the ``exception`` member (its formatted traceback).
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON (newlines in the message stay escaped)."""
        moment = datetime.fromtimestamp(record.created, UTC)
        document: dict[str, Any] = {
            "time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        document |= {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, separators=(",", ":"), default=str)


def configure_logging(log_format: LogFormat | str) -> dict[str, Any]:
    """Send every log record to stderr in `log_format`; returns uvicorn.run's logging options.

    The root logger gets one handler; uvicorn keeps its loggers but not its configuration
    (``log_config=None``, so they reach this handler) and its access log is off: the request
    line of api/request_observer.py replaces it (one line per request, not two).
    """
    handler = logging.StreamHandler(sys.stderr)
    if LogFormat(log_format) is LogFormat.JSON:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    return {"log_config": None, "access_log": False}
