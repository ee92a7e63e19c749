"""Offline verification of the audit log: recompute the Merkle tree and check every checkpoint.

Works on the database or on an exported log (JSON Lines, one entry per line with its
`leaf_hash` and `seal`). Edited entries are found by their leaf hash, removed entries by a gap in
the indexes, and entries removed at the end by a checkpoint (stored, or kept by the auditor) that
is larger than the log or whose root no longer matches. An entry edited together with its leaf
hash is found by its seal: the service signed each entry's index and leaf hash when it appended
it, and whoever edits rows cannot sign.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from policies.errors import InputFormatError, InvalidValueError
from policies.evidence.merkle import entry_leaf_hash, root_hash
from policies.evidence.retirement import Retirement
from policies.evidence.signed_note import Checkpoint, verify_note

HASHED_FIELDS = (
    "index",
    "time",
    "principal",
    "role",
    "action",
    "target",
    "request_id",
    "fabric",
    "digest_before",
    "digest_after",
)


@dataclass
class LogReport:
    """The outcome of a verification: `ok`, the log size, and every problem found."""

    size: int
    problems: list[str] = field(default_factory=list)
    first_bad_index: int | None = None
    # Entries a checkpoint disagrees with while no entry in them was found wrong (yet).
    unlocated: tuple[int, int] | None = None
    # Every index below this is covered by a checkpoint whose root matches.
    vouched: int = 0
    checkpoints: int = 0  # signed checkpoints that verified

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    def bad(self, index: int | None, message: str) -> None:
        """Record a problem; `index` (when known) lowers `first_bad_index`."""
        self.problems.append(message)
        if index is not None and (self.first_bad_index is None or index < self.first_bad_index):
            self.first_bad_index = index


def parse_export(text: str) -> list[dict[str, Any]]:
    """Entries of an exported log (JSON Lines); a line that is not JSON names its number."""
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise InputFormatError(f"not JSON: {error.msg}", line=number) from error
    return lines


def verify_log(
    entries: Sequence[dict[str, Any]],
    checkpoints: Iterable[str],
    keys: dict[str, Ed25519PublicKey],
    kept: str | None = None,
    *,
    expected_entries: int = 0,
    retired: Mapping[str, Retirement] | None = None,
    every_key: bool = True,
) -> LogReport:
    """Recompute the tree from `entries` and check it against signed checkpoint notes.

    Contract: the report is `ok` only if every entry matches its leaf hash and index, every
    checkpoint verifies under a known key and matches the log's prefix of its size, and the log
    holds at least `expected_entries` entries. Otherwise `first_bad_index` is never None: it is
    the exact index found (an edited or missing entry, the end of a truncated log), or, when only
    a checkpoint's root disagrees, the first index no verified checkpoint vouches for.

    Args:
        entries: Entry documents in index order, each with its stored `leaf_hash` (hex).
        checkpoints: Signed notes the service stored.
        keys: Verifier keys by key name (active and retired).
        kept: A checkpoint note the auditor kept from an earlier time, if any.
        expected_entries: The fewest entries the log must hold (e.g. one per audited row the
            database holds); fewer means entries were removed.
        retired: Retirements by key name (the keyring's): a retired key vouches only for
            checkpoints it could have signed while active, of at most its `log_size` entries.
        every_key: `keys` holds every key that ever signed (a keyring), so a seal naming
            another key is forged; False for one pinned key, which cannot judge other seals.
    """
    report = LogReport(size=len(entries))
    hashes = _leaf_hashes(entries, report)
    if len(entries) < expected_entries:
        report.bad(
            len(entries),
            f"the log holds {len(entries)} entries, but the state it records needs at least "
            f"{expected_entries}: entries were removed",
        )
    notes = [(note, "stored checkpoint") for note in checkpoints]
    notes += [(kept, "kept checkpoint")] if kept is not None else []
    verified = [
        (c, what)
        for note, what in notes
        if (c := _verified(note, keys, report, what))
        and _in_office(c, _signer(note), what, retired or {}, report)
    ]
    report.checkpoints = len(verified)
    _check_roots(sorted(verified, key=lambda item: item[0].size), hashes, report)
    _name_sealed_culprit(entries, _SealKeys(keys, retired or {}, every_key), report)
    return report


def _check_roots(
    checkpoints: list[tuple[Checkpoint, str]], hashes: list[bytes], report: LogReport
) -> None:
    """Compare each checkpoint (smallest first) with the log prefix of its size."""
    vouched = 0  # every index below this is covered by a checkpoint whose root matches
    for checkpoint, what in checkpoints:
        if checkpoint.size > len(hashes):
            report.bad(
                len(hashes),
                f"{what} of size {checkpoint.size} is larger than the log "
                f"({len(hashes)} entries): entries were removed at the end",
            )
        elif root_hash(hashes[: checkpoint.size]) == checkpoint.root:
            vouched = max(vouched, checkpoint.size)
            report.vouched = max(report.vouched, checkpoint.size)
        else:
            culprit = _culprit(report.first_bad_index, vouched, checkpoint.size)
            if culprit == vouched and report.unlocated is None:
                report.unlocated = (vouched, checkpoint.size)
            report.bad(
                culprit,
                f"{what} of size {checkpoint.size} does not match the log: an entry in "
                f"{vouched}..{checkpoint.size - 1} was altered or removed",
            )


def _culprit(known: int | None, vouched: int, size: int) -> int:
    # A bad entry already found inside the range explains the mismatch; otherwise the culprit is
    # somewhere from the first index that no matching checkpoint vouches for.
    return known if known is not None and vouched <= known < size else vouched


def seal_entry(index: int, leaf_hash: str, name: str, key: Ed25519PrivateKey) -> str:
    """An entry's seal: ``<key name> <base64 Ed25519 signature over its index and leaf hash>``."""
    return f"{name} {base64.b64encode(key.sign(_seal_message(index, leaf_hash))).decode()}"


def _seal_message(index: int, leaf_hash: str) -> bytes:
    return f"isofabric audit entry\n{index}\n{leaf_hash}\n".encode()


@dataclass(frozen=True)
class _SealKeys:
    """What judges seals: the verifier's keys by name and their retirements.

    `every_key`: the keys are every key that ever signed (a keyring), not one pinned key.
    """

    keys: Mapping[str, Ed25519PublicKey]
    retired: Mapping[str, Retirement]
    every_key: bool = True


def seal_verifies(entry: Mapping[str, Any], judge: _SealKeys) -> bool | None:
    """Whether `entry`'s seal vouches for its content; None when nothing can be judged.

    The seal covers the entry's index and the leaf hash recomputed from its content, so an edit
    shows even when the stored leaf hash was recomputed too. A retired key's seal vouches only
    for entries appended while it was active (below its retirement's log size); a seal naming a
    key the keyring does not hold is forged. None: no seal, or (one pinned key) another key's.
    """
    position, seal = entry.get("index"), entry.get("seal")
    if not isinstance(seal, str) or not seal or not isinstance(position, int):
        return None
    name, _, signature = seal.partition(" ")
    key, retirement = judge.keys.get(name), judge.retired.get(name)
    if key is None:
        return False if judge.every_key else None
    if retirement is not None and position >= retirement.log_size:
        return False
    leaf = entry_leaf_hash({k: entry.get(k) for k in HASHED_FIELDS}).hex()
    try:
        key.verify(base64.b64decode(signature, validate=True), _seal_message(position, leaf))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def _name_sealed_culprit(
    entries: Sequence[Mapping[str, Any]], judge: _SealKeys, report: LogReport
) -> None:
    """Name an entry edited together with its leaf hash by its seal.

    Where a checkpoint disagrees and no entry was found wrong, the first entry of the range
    whose seal fails is the edited one; failing that, the first without a seal (appended before
    seals, or without a key) is where the edit may start. Where no checkpoint disagrees, the
    entries no matching checkpoint covers (those after the newest) are still checked by their
    seals, so an edit after the last checkpoint is found too.
    """
    if report.unlocated is None:
        _check_uncovered_seals(entries, judge, report)
        return
    start, end = report.unlocated
    checked = [(e, seal_verifies(e, judge)) for e in entries[start:end]]
    broken = next((e for e, ok in checked if ok is False), None)
    unsealed = next((e for e, ok in checked if ok is None), None)
    named = broken if broken is not None else unsealed
    if named is None:
        return
    index = int(named["index"])
    report.problems.append(
        f"entry {index} was altered: it no longer matches its seal"
        if named is broken
        else f"entry {index} carries no seal: it, or a later one, was altered"
    )
    if report.first_bad_index == start:  # no problem found before the range
        report.first_bad_index = index


def _check_uncovered_seals(
    entries: Sequence[Mapping[str, Any]], judge: _SealKeys, report: LogReport
) -> None:
    """Name the first entry after the newest matching checkpoint whose seal fails or is gone.

    A missing seal after a sealed entry counts (the service seals every entry once it has a
    key): stripping the seal must not hide an edit.
    """
    sealed = False
    for position, entry in enumerate(entries):
        verdict = seal_verifies(entry, judge)
        stripped = verdict is None and sealed and judge.every_key and not entry.get("seal")
        if position >= report.vouched and (verdict is False or stripped):
            report.bad(
                position,
                f"entry {position} was altered: it no longer matches its seal"
                if verdict is False
                else f"entry {position} carries no seal though entries before it are sealed: "
                "it was altered (or appended while no signing key was installed)",
            )
            return
        sealed = sealed or verdict is True


def _leaf_hashes(entries: Sequence[dict[str, Any]], report: LogReport) -> list[bytes]:
    hashes = []
    for position, entry in enumerate(entries):
        if entry.get("index") != position:
            report.bad(position, f"entry {position} is missing (found index {entry.get('index')})")
        recomputed = entry_leaf_hash({k: entry.get(k) for k in HASHED_FIELDS})
        if entry.get("leaf_hash") not in (None, recomputed.hex()):
            report.bad(
                position,
                f"entry {position} was altered: its content no longer matches its leaf hash",
            )
        hashes.append(recomputed)
    return hashes


def _verified(
    note: str, keys: dict[str, Ed25519PublicKey], report: LogReport, what: str
) -> Checkpoint | None:
    # A checkpoint nobody can verify vouches for nothing: no index of the log is proven.
    name = _signer(note)
    key = keys.get(name or "")
    if key is None:
        report.bad(0, f"{what}: no known key named {name!r}; nothing in the log is proven")
        return None
    try:
        return verify_note(note, name or "", key)
    except InvalidValueError as error:
        report.bad(0, f"{what}: {error.detail}; nothing in the log is proven")
        return None


def _in_office(
    checkpoint: Checkpoint,
    signer: str | None,
    what: str,
    retired: Mapping[str, Retirement],
    report: LogReport,
) -> bool:
    """False (and a problem) for a checkpoint larger than its retired key's log at retirement.

    A rotation retires a key at a log size: any larger checkpoint was signed after it retired,
    by whoever still holds the key, and proves nothing.
    """
    retirement = retired.get(signer or "")
    if retirement is None or retirement.covers_checkpoint(checkpoint.size):
        return True
    report.bad(
        retirement.log_size,
        f"{what} of size {checkpoint.size} is signed by a key retired at log size "
        f"{retirement.log_size}: signed after its retirement, it vouches for nothing",
    )
    return False


def _signer(note: str) -> str | None:
    """The key name on the first signature line ("— <name> <base64>")."""
    for line in note.splitlines():
        if line.startswith("\u2014 "):
            parts = line.split(" ")
            return parts[1] if len(parts) == 3 else None
    return None


def load_public_key(pem: str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM; ``InvalidValueError`` for any other key type."""
    key = serialization.load_pem_public_key(pem.encode())
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidValueError("the public key is not an Ed25519 key")
    return key
