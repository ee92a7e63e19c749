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
from dataclasses import dataclass, field
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
    learned: list[KeyTransition] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> Trust:
        """The keys pinned in `path` (a keyring, or one public key PEM).

        Raises:
            TrustError: the file holds neither, or a keyring with no key.
        """
        text = path.read_text()
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
        accepted = []
        for statement in statements:
            active = [e for e in self.entries if e.retired is None]
            try:
                transition = verify_transition(statement, active)
                self.entries = apply_transition(self.entries, transition)
            except InvalidValueError:
                continue
            accepted.append(transition)
        self.learned += accepted
        return accepted

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


def position_kept(
    position: Position | None, learned: Sequence[KeyTransition], say: Callable[[str], None]
) -> Position | None:
    """The agent's newest manifest position, unless a key retired below it.

    Until the agent learns of a rotation it takes the retired key's manifests; that key signed
    positions below ``(epoch, log_size)`` of its retirement only. A higher position was signed
    after it retired (by whoever kept it: a replayed or forged manifest, e.g. with a sequence of
    2^53-1 that would refuse every legitimate manifest), so the agent forgets it: the next
    manifest of the active key sets it again.
    """
    for transition in learned:
        bound = (transition.retirement.epoch, transition.retirement.log_size)
        if position is not None and position >= bound:
            say(
                f"forgot manifest position {position[0]}:{position[1]}: the key that signed it "
                f"retired at {bound[0]}:{bound[1]}"
            )
            return None
    return position


def verified_keeping(
    trust: Trust,
    transitions: Callable[[], Sequence[Any]],
    verify: Callable[[tuple[Ed25519PublicKey, ...]], T],
    say: Callable[[str], None],
    held: tuple[Position | None, Callable[[Position | None], None]],
) -> T:
    """`verified`, then the agent's newest position kept or forgotten (`position_kept`).

    `held` is the position the agent remembers and how it stores a new one; a rotation learned
    while verifying is applied to it even when the manifest is then refused.
    """
    position, store = held
    before = len(trust.learned)
    try:
        return verified(trust, transitions, verify, say)
    finally:
        kept = position_kept(position, trust.learned[before:], say)
        if kept != position:
            store(kept)
