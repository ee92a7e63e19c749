"""UFM's PKey clients as they behave on the wire, rebuilt from the facts about them.

Each class replays one client of the UFM contract (``../shared/reference/ufm.md`` §1.4-1.5,
beside this repository's checkout): the routes and methods it calls, its request bodies byte for
byte as it builds them (a Go format string, serde's compact JSON, Python's ``json.dumps``), its
headers, the statuses it accepts and its retries. Written here from those facts, not from the
clients' code; each class names the source files the facts come from.

Requests go out through `Wire`: raw HTTP/1.1 (``http.client``) with exactly the headers a client
sends, in its order, and nothing else, so what the facade sees is what the client would send.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import random
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

JSON = "application/json"
GO_JSON = "application/json; charset=utf-8"
# What `requests` adds to every request it prepares (requests.utils.default_headers).
REQUESTS_DEFAULTS = (
    ("User-Agent", "python-requests/2.32.3"),
    ("Accept-Encoding", "gzip, deflate"),
    ("Accept", "*/*"),
    ("Connection", "keep-alive"),
)


def basic(user: str, password: str) -> str:
    """HTTP Basic credentials (RFC 7617) as Go's SetBasicAuth, requests and aiohttp build them."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def py_json(document: Any) -> bytes:
    """A body as ``requests``/``aiohttp`` ``json=`` and ``json.dumps`` write it (", ", ": ")."""
    return json.dumps(document).encode()


def serde_json(document: Any) -> bytes:
    """A body as Rust's ``serde_json::to_string`` writes it: compact; an f32 keeps its ``.0``."""
    return json.dumps(document, separators=(",", ":")).encode()


# ------------------------------------------------------------------------------------ the wire


@dataclass(frozen=True)
class Answer:
    """One response as a client sees it."""

    method: str
    path: str
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body)

    def date(self) -> datetime:
        """The response's ``Date`` header (RFC 9110 IMF-fixdate)."""
        return parsedate_to_datetime(self.headers["date"])

    def __str__(self) -> str:
        return f"{self.method} {self.path} -> {self.status} {self.body[:400]!r}"


class RefusedError(Exception):
    """The client takes this answer as a failure (its status check, or its parsing, failed)."""

    def __init__(self, answer: Answer, why: str = "") -> None:
        super().__init__(f"{why + ': ' if why else ''}{answer}")
        self.answer = answer


@dataclass
class Wire:
    """Raw HTTP/1.1 to `base` with exactly `headers` (plus Host and Content-Length)."""

    base: str
    headers: tuple[tuple[str, str], ...]
    timeout: float = 60.0
    log: list[Answer] = field(default_factory=list)

    def send(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: Iterable[tuple[str, str]] = (),
    ) -> Answer:
        """Send one request on a fresh connection; the answer (gzip undone, as clients do)."""
        parts = urlsplit(self.base)
        target = parts.path.rstrip("/") + path
        connection = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port, timeout=self.timeout
        )
        started = time.monotonic()
        try:
            connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            connection.putheader("Host", parts.netloc)
            for name, value in (*self.headers, *headers):
                connection.putheader(name, value)
            if body is not None:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        seconds = time.monotonic() - started
        received = {name.lower(): value for name, value in response.getheaders()}
        if received.get("content-encoding") == "gzip":
            data = gzip.decompress(data)
        answer = Answer(method, target, response.status, received, data, seconds)
        self.log.append(answer)
        return answer


# ---------------------------------------------------------------------------- ib-kubernetes


@dataclass
class Backoff:
    """``wait.ExponentialBackoff`` as ib-kubernetes configures it (pkg/daemon/daemon.go).

    ``{Duration: 1 s, Factor: 1.6, Jitter: 0.1, Steps: 6}``: up to six attempts, sleeping
    1 s, 1.6 s, 2.56 s, ... (plus up to 10 % jitter) between them. The replay records the sleeps
    instead of sleeping.
    """

    duration: float = 1.0
    factor: float = 1.6
    jitter: float = 0.1
    steps: int = 6
    attempts: int = 0
    slept: list[float] = field(default_factory=list)

    def run(self, condition: Callable[[], bool]) -> bool:
        """True once `condition` holds; False after the last step (ErrWaitTimeout)."""
        delay = self.duration
        for step in range(self.steps):
            self.attempts += 1
            if condition():
                return True
            if step < self.steps - 1:
                self.slept.append(delay * (1 + self.jitter * random.random()))
                delay *= self.factor
        return False


def mac_like(guid: str) -> str:
    """ib-kubernetes' ``convertToMacAddr``: ':' after every two characters of a listed GUID."""
    return ":".join(guid[i : i + 2] for i in range(0, len(guid), 2))


# net.ParseMAC of an 8-octet EUI-64, as ib-kubernetes parses what `mac_like` returns.
EUI64 = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){7}")


class IbKubernetes:
    """Mellanox/ib-kubernetes@528f63f, its UFM plugin and HTTP driver.

    ``pkg/sm/plugins/ufm/ufm.go``: ``Validate``, ``AddGuidsToPKey``, ``RemoveGuidsFromPKey``,
    ``ListGuidsInUse``; the bodies are Go format strings (``"0x%04X"``, GUIDs ``%q`` of
    ``GUIDToString``: the hardware address without ':'). ``pkg/drivers/http/client.go``: Basic
    auth and ``Content-Type: application/json; charset=utf-8`` on every request, any status but
    the expected 200 is an error, no timeout. The UFM address is a host (``UFM_ADDRESS``): the
    paths are always UFM's own.
    """

    def __init__(self, url: str, username: str, password: str) -> None:
        self.wire = Wire(
            url,
            (
                ("User-Agent", "Go-http-client/1.1"),
                ("Authorization", basic(username, password)),
                ("Content-Type", GO_JSON),
                ("Accept-Encoding", "gzip"),
            ),
        )

    def _expect_200(self, method: str, path: str, body: bytes | None = None) -> Answer:
        answer = self.wire.send(method, path, body)
        if answer.status != 200:
            raise RefusedError(answer, "expected status code 200")
        return answer

    def validate(self) -> None:
        self._expect_200("GET", "/ufmRest/app/ufm_version")

    @staticmethod
    def guid_list(guids: Sequence[int]) -> str:
        return ",".join(f'"{guid:016x}"' for guid in guids)

    def add_guids_to_pkey(self, pkey: int, guids: Sequence[int]) -> None:
        body = (
            f'{{"pkey": "0x{pkey:04X}", "index0": true, "ip_over_ib": true, '
            f'"membership": "full", "guids": [{self.guid_list(guids)}]}}'
        )
        self._expect_200("POST", "/ufmRest/resources/pkeys", body.encode())

    def remove_guids_from_pkey(self, pkey: int, guids: Sequence[int]) -> None:
        body = f'{{"pkey": "0x{pkey:04X}", "guids": [{self.guid_list(guids)}]}}'
        self._expect_200("POST", "/ufmRest/actions/remove_guids_from_pkey", body.encode())

    def list_guids_in_use(self) -> dict[str, str]:
        """GUID (as a MAC-like address) -> P_Key, the last P_Key listing a GUID winning."""
        answer = self._expect_200("GET", "/ufmRest/resources/pkeys/?guids_data=true")
        in_use: dict[str, str] = {}
        for pkey, data in answer.json().items():
            for member in data.get("guids") or []:
                address = mac_like(member["guid"])
                if not EUI64.fullmatch(address):
                    raise RefusedError(answer, f"net.ParseMAC({address!r}) fails")
                in_use[address] = pkey
        return in_use

    def attempt(self, operation: Callable[[], None]) -> Callable[[], bool]:
        """A backoff condition: the operation succeeded (a refusal is logged and retried)."""

        def condition() -> bool:
            try:
                operation()
            except (RefusedError, LookupError):  # any error of the plugin's call
                return False
            return True

        return condition


def pool_reset(in_use: dict[str, str], first: int, last: int) -> dict[int, str]:
    """``guid_pool.Reset``: the listed GUIDs inside the pool's range, GUID -> P_Key."""
    found = {int(address.replace(":", ""), 16): pkey for address, pkey in in_use.items()}
    return {guid: pkey for guid, pkey in found.items() if first <= guid <= last}


class TogetherIbKubernetes(IbKubernetes):
    """togethercomputer/ib-kubernetes@156d563, the fork's changes on the wire.

    ``pkg/sm/plugins/ufm/ufm.go``: ``pKeyExists`` (``GET /ufmRest/resources/pkeys/0x%04X``; a
    404 or ``{}`` is absent), ``AddGuidsToPKey`` (exists or not, the create call is commented out;
    body without ``ip_over_ib``, ``index0`` from ENABLE_INDEX0_FOR_PRIMARY_PKEY, default true),
    ``AddGuidsToLimitedPKey`` (``membership: limited, index0: false``; refuses to create the
    key), ``GetLastPKeyUpdateTimestamp`` (three formats), ``GetServerTime`` (``HEAD
    /ufmRest/app/ufm_version``, the ``Date`` header). ``pkg/daemon/daemon.go``:
    ``canProceedWithPkeyModification`` (`Barrier`).
    """

    index0 = True

    def pkey_exists(self, pkey: int) -> bool:
        answer = self.wire.send("GET", f"/ufmRest/resources/pkeys/0x{pkey:04X}")
        if answer.status == 404:
            return False
        if answer.status != 200:
            raise RefusedError(answer, "expected status code 200")
        return bool(answer.json())

    def add_guids_to_pkey(self, pkey: int, guids: Sequence[int]) -> None:
        self.pkey_exists(pkey)  # absent: createEmptyPKey is commented out ("breaks UFM")
        index0 = "true" if self.index0 else "false"
        body = (
            f'{{"pkey": "0x{pkey:04X}", "guids": [{self.guid_list(guids)}], '
            f'"membership": "full", "index0": {index0}}}'
        )
        self._expect_200("POST", "/ufmRest/resources/pkeys", body.encode())

    def add_guids_to_limited_pkey(self, pkey: int, guids: Sequence[int]) -> None:
        if not self.pkey_exists(pkey):
            raise LookupError(f"limited pkey 0x{pkey:04X} does not exist, will not create it")
        body = (
            f'{{"pkey": "0x{pkey:04X}", "guids": [{self.guid_list(guids)}], '
            '"membership": "limited", "index0": false}'
        )
        self._expect_200("POST", "/ufmRest/resources/pkeys", body.encode())

    def last_pkey_update(self) -> datetime | None:
        answer = self._expect_200("GET", "/ufmRest/resources/pkeys/last_updated")
        text = answer.json()["last_updated"]
        return None if text is None else parse_last_updated(text)

    def server_time(self) -> datetime:
        answer = self.wire.send("HEAD", "/ufmRest/app/ufm_version")
        return answer.date()


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# Go's layouts "Mon Jan  2 15:04:05 MST 2006" and "Mon Jan 2 15:04:05 MST 2006" (UTC zone),
# and "02-01-2006, 15:04:05" (the SM's time zone, UTC by default).
_GO_PADDED = re.compile(r"[A-Z][a-z]{2} ([A-Z][a-z]{2})  (\d) (\d\d):(\d\d):(\d\d) UTC (\d{4})")
_GO_PLAIN = re.compile(r"[A-Z][a-z]{2} ([A-Z][a-z]{2}) (\d{1,2}) (\d\d):(\d\d):(\d\d) UTC (\d{4})")
_DAY_FIRST = re.compile(r"(\d\d)-(\d\d)-(\d{4}), (\d\d):(\d\d):(\d\d)")


def parse_last_updated(text: str) -> datetime:
    """``last_updated`` as the Together fork parses it; ValueError when no format matches."""
    for layout in (_GO_PADDED, _GO_PLAIN):
        matched = layout.fullmatch(text)
        if matched and matched[1] in _MONTHS:
            month, day, hour, minute, second, year = matched.groups()
            numbers = (int(year), _MONTHS.index(month) + 1, int(day), int(hour), int(minute))
            return datetime(*numbers, int(second), tzinfo=UTC)
    matched = _DAY_FIRST.fullmatch(text)
    if matched:
        day, month, year, hour, minute, second = (int(part) for part in matched.groups())
        return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    raise ValueError(f"failed to parse last_updated timestamp {text!r}: no matching format")


@dataclass
class Barrier:
    """The Together fork's ``canProceedWithPkeyModification`` (pkg/daemon/daemon.go).

    Proceed when UFM's ``last_updated`` is null, when nothing was stored yet, or when it is not
    before the server time stored at the previous proceed; proceeding stores the server's
    ``Date`` (a HEAD) if it is later than the stored one.
    """

    client: TogetherIbKubernetes
    last_call: datetime | None = None

    def can_proceed(self) -> bool:
        updated = self.client.last_pkey_update()
        if updated is None or self.last_call is None or not updated < self.last_call:
            self._stamp()
            return True
        return False

    def _stamp(self) -> None:
        now = self.client.server_time()
        if self.last_call is None or now > self.last_call:
            self.last_call = now


# ------------------------------------------------------------------------------------- NICo


class NotFoundError(RefusedError):
    """NICo's ``RestError::NotFound``: UFM answered 200 with ``{}``."""


class Nico:
    """NVIDIA/infra-controller@a02fa34, ``crates/ib-fabric/src/ib/ufmclient/{mod,rest}.rs``.

    ``new_client``: with a token, base path ``/ufmRestV3`` and ``Authorization: Basic <token>``;
    ``Content-Type: application/json`` and the crate's User-Agent on every request; 10 s
    connect/read/write timeout (``REST_TIME_OUT``); 200 or 201 is success. ``get`` takes a body
    of exactly ``{}`` as not found, then deserializes (serde: missing required fields fail,
    unknown ones are ignored). Bodies are serde's compact JSON of its structs, the P_Key as
    ``PartitionKey``'s Display, ``0x`` and lower-case hex (``0x67``). Routes 1-4, 6, 8, 10, 13.
    """

    TIMEOUT = 10.0

    def __init__(self, url: str, token: str) -> None:
        headers = (
            ("User-Agent", "ib-fabric"),
            ("Content-Type", JSON),
            ("Authorization", f"Basic {token.strip()}"),
        )
        self.wire = Wire(url, headers, timeout=self.TIMEOUT)

    def _execute(self, method: str, path: str, body: bytes | None = None) -> Answer:
        answer = self.wire.send(method, "/ufmRestV3/" + path.strip("/"), body)
        if answer.status not in (200, 201):
            raise RefusedError(answer, f"HTTP error code {answer.status}")
        return answer

    def _get(self, path: str) -> Any:
        answer = self._execute("GET", path)
        if answer.body == b"{}":
            raise NotFoundError(answer, "resource not found")
        try:
            return answer.json()
        except ValueError as error:
            raise RefusedError(answer, "malformed response") from error

    @staticmethod
    def pkey(value: int) -> str:
        return f"0x{value:x}"

    def version(self) -> str:
        version = require(self._get("/app/ufm_version"), ufm_release_version=str)
        return str(version["ufm_release_version"])

    def sm_config(self) -> dict[str, Any]:
        fields = {"subnet_prefix": str, "m_key": str, "sm_key": str, "sa_key": str}
        return require(self._get("/app/smconf"), m_key_per_port=bool, **fields)

    def list_partitions(self, *, guids: bool) -> dict[int, dict[str, Any]]:
        # Without a query UFM's shape differs, so NICo always asks for one (never both).
        path = "/resources/pkeys?guids_data=true" if guids else "/resources/pkeys?qos_conf=true"
        listed = self._get(path)
        return {nico_partition_key(key): partition_data(data) for key, data in listed.items()}

    def get_partition(self, pkey: int, *, guids: bool, qos: bool) -> dict[str, Any]:
        query = "&".join(q for q, on in (("guids_data=true", guids), ("qos_conf=true", qos)) if on)
        path = f"/resources/pkeys/{self.pkey(pkey)}" + (f"?{query}" if query else "")
        return partition_data(self._get(path))

    def list_ports(self) -> list[dict[str, Any]]:
        answer = self._execute("GET", "/resources/ports?sys_type=Computer")
        fields = {"guid": str, "name": str, "systemID": str, "lid": int, "dname": str}
        states = {"system_name": str, "physical_state": str, "logical_state": str}
        return [require(port, **fields, **states) for port in answer.json()]

    def bind_ports(
        self, pkey: str, guids: Sequence[int], *, ipoib: bool, membership: str, index0: bool
    ) -> None:
        body = {
            "pkey": pkey,
            "ip_over_ib": ipoib,
            "membership": membership,
            "index0": index0,
            "guids": [f"{guid:016x}" for guid in guids],
        }
        self._execute("POST", "/resources/pkeys", serde_json(body))

    def unbind_ports(self, pkey: str, guids: Sequence[int]) -> None:
        body = {"pkey": pkey, "guids": [f"{guid:016x}" for guid in guids]}
        self._execute("POST", "/actions/remove_guids_from_pkey", serde_json(body))

    def update_partition_qos(
        self, pkey: str, *, mtu_limit: int, service_level: int, rate_limit: float
    ) -> None:
        body = {
            "pkey": pkey,
            "mtu_limit": mtu_limit,
            "service_level": service_level,
            "rate_limit": float(rate_limit),
        }
        self._execute("PUT", "/resources/pkeys/qos_conf", serde_json(body))


def require(document: Any, **fields: type) -> dict[str, Any]:
    """serde's deserialization of a struct: every required field present with its type."""
    if not isinstance(document, dict):
        raise TypeError(f"expected an object, got {document!r}")
    for name, kind in fields.items():
        if name not in document:
            raise KeyError(f"missing field `{name}` in {document!r}")
        value = document[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"field `{name}` is not {kind.__name__}: {value!r}")
    return document


def partition_data(document: Any) -> dict[str, Any]:
    """NICo's ``PartitionData``: partition and ip_over_ib required; guids are ``PortConfig``."""
    require(document, partition=str, ip_over_ib=bool)
    for port in document.get("guids") or []:
        require(port, guid=str, index0=bool)
        if port.get("membership") not in ("full", "limited"):
            raise ValueError(f"unknown membership in {port!r}")
    if document.get("membership") not in (None, "full", "limited"):
        raise ValueError(f"unknown membership in {document!r}")
    return dict(document)


def nico_partition_key(text: str) -> int:
    """``PartitionKey::try_from(String)``: ``0x`` is hex, else decimal; the full bit refused."""
    lowered = text.lower()
    value = int(lowered[2:], 16) if lowered.startswith("0x") else int(lowered, 10)
    if value != value & 0x7FFF:
        raise ValueError(f"Invalid pkey '{text}'")
    return value


# ------------------------------------------------------------------------ nv-config-manager


class ConfigManager:
    """NVIDIA/nv-config-manager, its Temporal activities and UFM client.

    ``…/temporal/activities/ib_pkey.py``: ``validate_pkey_available`` (``GET /resources/pkeys``,
    no query, keys of a dict or a list), ``create_pkey_on_ufm`` (``POST /resources/pkeys/add``
    ``{"pkey","ip_over_ib"}``, index0 no longer sent), ``verify_pkey_created``,
    ``add_guids_to_pkey`` (read with ``guids_data``, merge, one ``PUT /resources/pkeys/`` with
    index-aligned ``memberships``), ``remove_guids_from_pkey`` (``DELETE
    /resources/pkeys/{pkey}/guids/{g1,g2}``), the verify stages; a 404 on a read is "absent".
    ``…/temporal/client/ufm.py``: ``https://{host}/ufmRest``, aiohttp Basic auth, ``json=``
    bodies; on 401 or 403 it tries the next rotation password; any other status >= 400 fails.
    Route 8 (POST add) was its add before PR #95 (it makes every member full); the replay follows
    the read-merge-PUT that replaced it.
    """

    def __init__(self, url: str, username: str, passwords: Sequence[str]) -> None:
        self.url, self.username, self.passwords = url, username, list(passwords)
        self.tried: list[int] = []

    def request(self, method: str, path: str, document: Any = None) -> Any:
        body = None if document is None else py_json(document)
        for password in self.passwords:
            headers = [
                ("User-Agent", "Python/3.12 aiohttp/3.10.5"),
                ("Accept", "*/*"),
                ("Accept-Encoding", "gzip, deflate"),
                ("Authorization", basic(self.username, password)),
            ]
            if body is not None:
                headers.append(("Content-Type", JSON))
            answer = Wire(self.url, tuple(headers)).send(method, "/ufmRest" + path, body)
            self.tried.append(answer.status)
            if answer.status in (401, 403):
                continue  # the next rotation password
            if answer.status >= 400:
                raise RefusedError(answer, f"UFM request failed: HTTP {answer.status}")
            return json.loads(answer.body) if answer.body else {}
        raise PermissionError(f"all {len(self.passwords)} password attempts failed")

    def pkey_members(self, pkey: str) -> tuple[bool, dict[str, str], bool | None]:
        """``_get_pkey_state``: (exists, GUID -> membership, ip_over_ib)."""
        try:
            data = self.request("GET", f"/resources/pkeys/{pkey}?guids_data=true")
        except RefusedError as refused:
            if refused.answer.status != 404:
                raise
            return False, {}, None
        members = {}
        for entry in data.get("guids") or []:
            guid, membership = str(entry.get("guid", "")), str(entry.get("membership", ""))
            if not guid or not membership:
                raise ValueError(f"a member with no guid or membership: {entry!r}")
            members[guid.lower()] = membership.lower()
        ip_over_ib = data.get("ip_over_ib")
        return True, members, ip_over_ib if isinstance(ip_over_ib, bool) else None

    def existing_pkeys(self) -> set[int]:
        listed = self.request("GET", "/resources/pkeys")
        if isinstance(listed, dict):
            keys = [str(key) for key in listed]
        else:
            keys = [str(i["pkey"]) if isinstance(i, dict) else str(i) for i in listed]
        return {int(key, 16) & 0x7FFF for key in keys}

    def validate_pkey_available(self, pkey: str) -> None:
        if int(pkey, 16) & 0x7FFF in self.existing_pkeys():
            raise LookupError(f"PKey {pkey} is already in use on UFM")

    def create_pkey(self, pkey: str, ip_over_ib: bool = True) -> None:
        self.request("POST", "/resources/pkeys/add", {"pkey": pkey, "ip_over_ib": ip_over_ib})

    def verify_pkey_created(self, pkey: str) -> dict[str, Any]:
        data = self.request("GET", f"/resources/pkeys/{pkey}")
        if not data:
            raise LookupError(f"PKey {pkey} not found on UFM after creation")
        return dict(data)

    def add_guids(self, pkey: str, guids: Sequence[str], memberships: Sequence[str]) -> None:
        _, current, ip_over_ib = self.pkey_members(pkey)
        merged = dict(current)
        for guid, membership in zip(guids, memberships, strict=True):
            merged[guid.lower()] = membership.lower()
        payload = {
            "pkey": pkey,
            "guids": list(merged),
            "memberships": list(merged.values()),
            "ip_over_ib": ip_over_ib if ip_over_ib is not None else True,
        }
        self.request("PUT", "/resources/pkeys/", payload)

    def remove_guids(self, pkey: str, guids: Sequence[str]) -> None:
        self.request("DELETE", f"/resources/pkeys/{pkey}/guids/{','.join(guids)}")


# ------------------------------------------------------------------ networking-mlnx-baremetal


def ironic_client_id(guid: int) -> str:
    """An Ironic IB port's DHCP client-id: Mellanox's 12-octet prefix, then the port GUID."""
    octets = [f"{guid:016x}"[i : i + 2] for i in range(0, 16, 2)]
    return "ff:00:00:00:00:00:02:00:00:02:c9:00:" + ":".join(octets)


def client_id_to_guid(client_id: str) -> str:
    """``mlnx_ib_client_id_to_guid``: the last 24 characters of a 59-character id, no ':'."""
    return client_id[-24:].replace(":", "") if len(client_id) == 59 else client_id


class MlnxBaremetal:
    """IamFive/networking-mlnx-baremetal, its UFM client and mechanism driver.

    ``ufmclient/session.py``: ``{endpoint}/ufmRest``, ``requests`` with HTTPBasicAuth, JSON
    bodies (``Content-Type: application/json`` on POST and PUT), ``raise_for_status``.
    ``ufmclient/modules/resources/pkey.py``: ``list`` and ``get`` (``?guids_data=%s`` of a Python
    bool), ``add_guids`` (``POST /resources/pkeys/``), ``update`` (``PUT /resources/pkeys``),
    ``remove_guids`` (``DELETE …/guids/g1,g2``), ``delete``. ``plugins/ml2/mech_ib_baremetal.py``:
    binds a node's ports (GUIDs from the Ironic ports' client-ids) to ``hex(segmentation_id)``
    with index0, then to each default limited P_Key (limited, no index0). Routes 4, 6, 8, 9, 11, 12.
    """

    def __init__(self, endpoint: str, username: str, password: str) -> None:
        self.wire = Wire(
            endpoint,
            (
                (REQUESTS_DEFAULTS[0][0], "python-ufmclient - v0.0.1"),
                *REQUESTS_DEFAULTS[1:],
                ("Authorization", basic(username, password)),
            ),
        )

    def _request(self, method: str, path: str, payload: Any = None) -> Answer:
        body = None if payload is None else py_json(payload)
        headers = [("Content-Type", JSON)] if method in ("POST", "PUT", "PATCH") else []
        answer = self.wire.send(method, "/ufmRest" + path, body, headers)
        if answer.status >= 400:
            raise RefusedError(answer, "raise_for_status")
        return answer

    def list(self, with_guid: bool = False) -> Any:
        return self._request("GET", f"/resources/pkeys?guids_data={with_guid}").json()

    def get(self, pkey: str, with_guid: bool = False) -> Any:
        return self._request("GET", f"/resources/pkeys/{pkey}?guids_data={with_guid}").json()

    @staticmethod
    def _payload(pkey: str, client_ids: Sequence[str], index0: bool, full: bool) -> Any:
        return {
            "guids": [client_id_to_guid(client_id) for client_id in client_ids],
            "ip_over_ib": True,
            "index0": index0,
            "membership": "full" if full else "limited",
            "pkey": pkey,
        }

    def add_guids(
        self, pkey: str, client_ids: Sequence[str], index0: bool = False, full: bool = True
    ) -> None:
        self._request("POST", "/resources/pkeys/", self._payload(pkey, client_ids, index0, full))

    def update(
        self, pkey: str, client_ids: Sequence[str], index0: bool = False, full: bool = True
    ) -> None:
        self._request("PUT", "/resources/pkeys", self._payload(pkey, client_ids, index0, full))

    def remove_guids(self, pkey: str, client_ids: Sequence[str]) -> None:
        joined = ",".join(client_id_to_guid(client_id) for client_id in client_ids)
        self._request("DELETE", f"/resources/pkeys/{pkey}/guids/{joined}")

    def delete(self, pkey: str) -> None:
        self._request("DELETE", f"/resources/pkeys/{pkey}")

    def bind_port(
        self, segmentation_id: int, client_ids: Sequence[str], default_limited: Sequence[str]
    ) -> None:
        """The mechanism driver's ``bind_port`` for a node's IB ports (SR-IOV off)."""
        self.add_guids(hex(segmentation_id), client_ids, index0=True)
        for pkey in default_limited:
            self.add_guids(pkey, client_ids, index0=False, full=False)


# ---------------------------------------------------------------------------------- Slurm


def dynamic_pkey(job_id: int) -> str:
    """``ufm_slurm_base.py get_pkey_name`` in dynamic mode: ``hex(job_id % 0x7ffe)``, 0 -> 1."""
    wrapped = job_id % 0x7FFE
    return hex(1 if wrapped == 0 else wrapped)


class SlurmIntegration:
    """Mellanox/ufm_sdk_3.0@3e96418, plugins/SLURM-Integration (prolog and epilog).

    ``ufm_slurm_utils.py``: a ``requests`` session with ``Content-Type: application/json;
    charset=utf-8`` on every request and, by ``auth_type``, Basic credentials (``/ufmRest``),
    ``Authorization: Basic <token>`` (``/ufmRestV3``, the default ``token_auth``) or Negotiate
    (``/ufmRestKrb``); ``IsUfmRunning`` (``GET app/ufm_version``, 200 and JSON),
    ``_add_hosts_to_pkey`` (``POST resources/pkeys/hosts``, ``json.dumps`` of ``{"hosts_names":
    $SLURM_JOB_NODELIST, "pkey", "ip_over_ib", "index0"}``), ``_remove_hosts_from_pkey``
    (``DELETE resources/pkeys/{pkey}/hosts/{nodes}``). Failures are only logged
    (``fail_slurm_job_upon_failure=0``): the replay returns each answer for the test to judge.
    """

    PREFIX = {"basic_auth": "/ufmRest", "token_auth": "/ufmRestV3", "kerberos_auth": "/ufmRestKrb"}

    def __init__(self, url: str, auth_type: str, *, token: str = "", user: str = "") -> None:
        self.prefix = self.PREFIX[auth_type]
        if auth_type == "basic_auth":
            credentials = basic(user, token)
        elif auth_type == "token_auth":
            credentials = f"Basic {token}"
        else:
            credentials = "Negotiate YIIC"  # a GSSAPI token the facade cannot check
        headers = (*REQUESTS_DEFAULTS, ("Content-Type", GO_JSON), ("Authorization", credentials))
        self.wire = Wire(url, headers)

    def is_ufm_running(self) -> bool:
        answer = self.wire.send("GET", f"{self.prefix}/app/ufm_version")
        try:
            json.loads(answer.body)
        except ValueError:
            return False
        return answer.status == 200

    def prolog(
        self, nodelist: str, pkey: str, ip_over_ib: bool = True, index0: bool = False
    ) -> Answer:
        body = {"hosts_names": nodelist, "pkey": pkey, "ip_over_ib": ip_over_ib, "index0": index0}
        return self.wire.send("POST", f"{self.prefix}/resources/pkeys/hosts", py_json(body))

    def epilog(self, nodelist: str, pkey: str) -> Answer:
        # The node list goes into the path as Slurm wrote it (requests leaves ',' and '[]').
        return self.wire.send("DELETE", f"{self.prefix}/resources/pkeys/{pkey}/hosts/{nodelist}")


# ----------------------------------------------------------------------------- ufm_pkeys.py


class UfmPkeysScript:
    """Mellanox/ufm_sdk_3.0@3e96418, scripts/ufm_pkeys/ufm_pkeys.py and utils/ufm_rest_client.py.

    ``UfmRestClient``: with a token ``/ufmRestV3/`` and ``Authorization: Basic <token>``, else
    Basic credentials on ``/ufmRest/``; ``requests`` with ``json=payload`` on POST, PUT and
    DELETE (DELETE sends the default ``{}``); ``raise_for_status``. ``generate_token``: ``POST
    app/tokens``, reads ``access_token``. ``UfmPkeysManagement``: ``set_pkey`` (``PUT
    resources/pkeys``: guids, pkey, index0, ip_over_ib, then ``memberships`` or ``membership``),
    ``get_pkeys`` (``?guids_data=true``, all or one), ``delete_pkey``; success is exactly 200.
    Routes 4, 6, 9, 12.
    """

    def __init__(
        self, url: str, *, token: str | None = None, user: str = "", password: str = ""
    ) -> None:
        self.prefix = "ufmRestV3" if token else "ufmRest"
        auth = f"Basic {token}" if token else basic(user, password)
        self.wire = Wire(url, (*REQUESTS_DEFAULTS, ("Authorization", auth)))

    def send_request(self, url: str, method: str = "GET", payload: Any = None) -> Answer:
        body = None if method == "GET" else py_json({} if payload is None else payload)
        headers = [] if body is None else [("Content-Type", JSON)]
        answer = self.wire.send(method, f"/{self.prefix}/{url}", body, headers)
        if answer.status >= 400:
            raise RefusedError(answer, "raise_for_status")
        return answer

    def generate_token(self) -> str:
        return str(self.send_request("app/tokens", "POST").json().get("access_token"))

    def set_pkey(
        self,
        pkey: str,
        guids: Sequence[str],
        memberships: Sequence[str] | None = None,
        default_membership: str = "full",
        index0: bool = False,
        ip_over_ib: bool = True,
    ) -> Answer:
        payload: dict[str, Any] = {
            "guids": list(guids),
            "pkey": pkey,
            "index0": index0,
            "ip_over_ib": ip_over_ib,
        }
        if memberships:
            payload["memberships"] = list(memberships)
        else:
            payload["membership"] = default_membership
        return self._ok(self.send_request("resources/pkeys", "PUT", payload))

    def get_pkeys(self, pkey: str | None = None) -> Any:
        url = f"resources/pkeys/{pkey}" if pkey else "resources/pkeys"
        return self._ok(self.send_request(f"{url}?guids_data=true")).json()

    def delete_pkey(self, pkey: str) -> Answer:
        return self._ok(self.send_request(f"resources/pkeys/{pkey}", "DELETE"))

    @staticmethod
    def _ok(answer: Answer) -> Answer:
        if answer.status != 200:
            raise RefusedError(answer, "the script checks for exactly 200")
        return answer
