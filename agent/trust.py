"""The keys an agent takes manifests from, and how it follows a rotation of the service's key.

The agent pins the service's keys in a file (``--public-key``): the service's keyring (JSON
Lines, policies/evidence/keyring.py) or one Ed25519 public key PEM. It takes manifests from the
**active** keys only: a key the keyring marks retired signs no manifest it acts on.

When the service rotates its key, the agent learns the successor from the service's key
transition statements (``GET /v1/keys/transitions``; policies/evidence/key_transition.py): a
statement is accepted once, only if the key it retires is one the agent trusts as active and
both that key and the successor signed it. The agent then retires the old key in its copy,
appends the new one (written back to a pinned keyring file, atomically) and from then on takes
manifests from the new key only. It reads the statements when it starts and whenever a manifest
is signed by no active key; a pinned PEM file is not rewritten, so the agent re-learns after a
restart.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agent.manifest import ManifestError
from policies.errors import InvalidValueError
from policies.evidence.audit_log import load_public_key
from policies.evidence.key_transition import KeyTransition, apply_transition, verify_transition
from policies.evidence.keyring import KeyringEntry, active_keys, parse_keyring

T = TypeVar("T")


class TrustError(ManifestError):
    """The pinned file holds neither a keyring nor an Ed25519 public key PEM."""


@dataclass
class Trust:
    """The pinned keys (`entries`), and the keyring file that keeps what the agent learns."""

    entries: list[KeyringEntry]
    keyring_file: Path | None = None
    checked: bool = False  # the service's transitions were read since the agent started

    @classmethod
    def load(cls, path: Path) -> Trust:
        """The keys pinned in `path` (a keyring, or one public key PEM).

        Raises:
            TrustError: the file holds neither, or a keyring with no key.
        """
        try:
            text = path.read_text()
        except UnicodeDecodeError as error:  # e.g. a DER file: neither format the agent reads
            raise TrustError(f"{path}: not a PEM public key nor a keyring (not text)") from error
        try:
            if text.lstrip().startswith("-----BEGIN"):
                return cls.of([load_public_key(text)])
            entries = parse_keyring(text, str(path))
        except (ValueError, InvalidValueError) as error:  # cryptography raises ValueError
            raise TrustError(
                f"{path}: not an Ed25519 public key PEM nor a keyring: {error}"
            ) from error
        if not entries:
            raise TrustError(f"{path}: the keyring holds no key")
        return cls(entries, keyring_file=path)

    @classmethod
    def of(cls, keys: Iterable[Ed25519PublicKey]) -> Trust:
        """Trust in `keys` alone (a pinned PEM), kept in memory only."""
        return cls([KeyringEntry.of(f"pinned-{n}", _pem(key)) for n, key in enumerate(keys)])

    def active(self) -> tuple[Ed25519PublicKey, ...]:
        """The keys manifests may be signed with: every pinned key no rotation retired."""
        return tuple(active_keys(self.entries))

    def learn(self, statements: Sequence[Any]) -> list[KeyTransition]:
        """Accept every statement that retires an active key (in order, so chains follow).

        Statements about keys this agent does not trust as active (already learned, another
        deployment's, or forged) are skipped. Returns the transitions accepted now.
        """
        accepted: list[KeyTransition] = []
        pending = list(statements)
        while pending:  # in any order: a chain A->B, B->C is followed whatever the list's order
            still = [s for s in pending if not self._accept(s, accepted)]
            if len(still) == len(pending):
                break
            pending = still
        return accepted

    def _accept(self, statement: Any, accepted: list[KeyTransition]) -> bool:
        """Accept one statement (True), or leave it for a later pass or for good (False)."""
        active = [e for e in self.entries if e.retired is None]
        try:
            transition = verify_transition(statement, active)
            self.entries = apply_transition(self.entries, transition)
        except (InvalidValueError, ValueError, TypeError, RecursionError):
            return False  # a statement this agent cannot take: never fatal to the others
        accepted.append(transition)
        return True

    def keep(self) -> None:
        """Write what was learned back to the pinned keyring file (a pinned PEM stays as is)."""
        if self.keyring_file is not None:
            _write_keyring(self.keyring_file, self.entries)


def verified(
    trust: Trust,
    transitions: Callable[[], Sequence[Any]],
    verify: Callable[[tuple[Ed25519PublicKey, ...]], T],
    say: Callable[[str], None],
) -> T:
    """`verify` with the active keys, after following any rotation the service published.

    The statements are read at the first call and again when no active key verifies: a
    manifest signed by a successor the agent has not learned yet. `verify`'s error stands when
    nothing new was learned.
    """
    if not trust.checked:
        _follow(trust, transitions, say)
    try:
        return verify(trust.active())
    except ValueError:
        if not _follow(trust, transitions, say):
            raise
    return verify(trust.active())


def _follow(
    trust: Trust, transitions: Callable[[], Sequence[Any]], say: Callable[[str], None]
) -> bool:
    """Read and accept the service's transitions; True when one was accepted."""
    try:
        accepted = trust.learn(transitions())
    except (ValueError, RuntimeError) as error:  # the client's ServerError is a RuntimeError
        say(f"key transitions unreadable: {error}")
        trust.checked = False  # read them again next time
        return False
    trust.checked = True
    try:
        if accepted:
            trust.keep()
    except OSError as error:
        say(f"the pinned keyring could not be rewritten ({error}): the agent re-learns at start")
    for t in accepted:
        say(
            f"followed the service's key rotation: '{t.retired_name}' retired at "
            f"{t.retirement.epoch}:{t.retirement.log_size}, now trusting '{t.new.name}'"
        )
    return bool(accepted)


def _write_keyring(path: Path, entries: Sequence[KeyringEntry]) -> None:
    """Rewrite the pinned keyring (scratch file, rename): the agent's copy follows the service's."""
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(4)}.new")
    scratch.write_text("".join(e.line() + "\n" for e in entries))
    os.replace(scratch, path)


def _pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


Position = tuple[int, int]
# A position and the keyid of the key that signed its manifest (None: not recorded).
HeldPosition = tuple[Position | None, str | None]


def position_kept(
    held: HeldPosition, entries: Sequence[KeyringEntry], say: Callable[[str], None]
) -> HeldPosition:
    """The agent's newest manifest position, unless its key retired below it.

    A retired key signed positions below ``(epoch, log_size)`` of its retirement only; a higher
    one was signed after it retired (by whoever kept it: a replayed or forged manifest, e.g.
    with a sequence of 2^53-1 that would refuse every legitimate manifest), so the agent forgets
    it and the next manifest of an active key sets it again. The rule reads the keyring as it is
    (learned, or copied by hand) and the key that signed the position, so it holds after a
    restart; a position recorded before signers were (no signer) is judged by every retired key.
    """
    position, signer = held
    retired = [e for e in entries if e.retired is not None and signer in (None, e.keyid)]
    for entry in retired:
        assert entry.retired is not None
        bound = (entry.retired.epoch, entry.retired.log_size)
        if position is not None and position >= bound:
            say(
                f"forgot manifest position {position[0]}:{position[1]}: '{entry.name}', which "
                f"signed it, retired at {bound[0]}:{bound[1]}"
            )
            return (None, None)
    return held


def verified_keeping(
    trust: Trust,
    transitions: Callable[[], Sequence[Any]],
    verify: Callable[[tuple[Ed25519PublicKey, ...]], T],
    say: Callable[[str], None],
    held: tuple[HeldPosition, Callable[[HeldPosition], None]],
) -> T:
    """`verified`, then the agent's newest position kept or forgotten (`position_kept`).

    `held` is the position the agent remembers (with the keyid that signed it) and how it
    stores a change; the rule is applied even when the manifest is then refused.
    """
    position, store = held
    try:
        return verified(trust, transitions, verify, say)
    finally:
        kept = position_kept(position, trust.entries, say)
        if kept != position:
            store(kept)
