"""Agents follow a rotation of the service's key, stop trusting the retired key, and order
manifests by ``(epoch, sequence)`` so that a database restore does not lock them out."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.opensm import Agent
from agent.state import load_state
from agent.trust import Trust
from policies.evidence.key_transition import sign_transition
from policies.evidence.keyring import KeyringEntry, Retirement, parse_keyring
from tenancy.store.key_store import public_pem

from .fakes import ACME, GLOBEX, Clock, FakeHost, FakeServer, bundle, partitions, settings

OLD, NEW, MALLORY = (Ed25519PrivateKey.generate() for _ in range(3))
RETIRED_AT = Retirement(datetime(2026, 12, 6, 12, 0, tzinfo=UTC), epoch=0, log_size=20)
LOCKOUT = 2**53 - 1  # the largest sequence JSON carries exactly


def transition(old=OLD, new=NEW, retirement=RETIRED_AT) -> dict[str, Any]:
    return sign_transition(("audit", old), ("audit.r2", new), retirement)


@pytest.fixture
def keyring(tmp_path: Path) -> Path:
    path = tmp_path / "keyring.jsonl"
    path.write_text(KeyringEntry.of("audit", public_pem(OLD.public_key())).line() + "\n")
    return path


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    path = tmp_path / "conf"
    path.mkdir()
    return path


def agent_for(conf_dir: Path, server: FakeServer, keyring: Path) -> Agent:
    options = replace(settings(conf_dir, OLD), keys=Trust.load(keyring))
    return Agent(options, server, FakeHost(conf_dir), clock=Clock(), rng=random.Random(7))


def test_an_agent_learns_the_successor_once_and_then_refuses_the_retired_key(conf_dir, keyring):
    server = FakeServer(NEW, transitions=[transition()])
    agent = agent_for(conf_dir, server, keyring)
    server.publish(bundle(partitions(ACME)), sequence=21)

    assert agent.cycle().outcome == "applied"
    kept = parse_keyring(keyring.read_text(), "keyring")
    assert [(e.name, e.retired) for e in kept] == [("audit", RETIRED_AT), ("audit.r2", None)]

    server.publish(bundle(partitions(ACME, GLOBEX)), sequence=30, key=OLD)
    assert agent.cycle().outcome == "refused"
    assert "signature verification failed" in server.reports[-1]["detail"]
    # a restarted agent reads its own rewritten keyring: the old key stays retired
    assert agent_for(conf_dir, server, keyring).cycle().outcome == "refused"


def test_a_transition_not_signed_by_a_trusted_key_teaches_nothing(conf_dir, keyring):
    server = FakeServer(MALLORY, transitions=[transition(old=MALLORY, new=MALLORY)])
    server.publish(bundle(partitions(ACME)), sequence=21)

    assert agent_for(conf_dir, server, keyring).cycle().outcome == "refused"
    assert len(parse_keyring(keyring.read_text(), "keyring")) == 1


def test_a_forged_huge_sequence_of_the_retired_key_does_not_lock_the_agent_out(conf_dir, keyring):
    # Whoever kept the old key signs a manifest the agent takes before it learns of the rotation.
    server = FakeServer(OLD)
    agent = agent_for(conf_dir, server, keyring)
    server.publish(bundle(partitions(ACME)), sequence=LOCKOUT)
    assert agent.cycle().outcome == "applied"
    assert load_state(conf_dir).installed_sequence == LOCKOUT

    server.transitions.append(transition())
    server.publish(bundle(partitions()), sequence=25, key=NEW)  # acme offboarded

    assert agent.cycle().outcome == "applied"
    assert load_state(conf_dir).installed_position == (0, 25)
    assert (conf_dir / "partitions.conf").read_text() == partitions()


def test_a_legitimate_position_below_the_retirement_is_kept(conf_dir, keyring):
    server = FakeServer(OLD)
    agent = agent_for(conf_dir, server, keyring)
    server.publish(bundle(partitions(ACME)), sequence=19)
    agent.cycle()
    server.transitions.append(transition())
    server.publish(bundle(partitions(ACME)), sequence=12, key=NEW)  # a replay, newly signed

    assert agent.cycle().outcome == "refused"
    assert load_state(conf_dir).installed_position == (0, 19)


def test_a_higher_epoch_is_accepted_with_a_lower_sequence_and_older_epochs_are_refused(
    conf_dir, keyring
):
    server = FakeServer(OLD)
    agent = agent_for(conf_dir, server, keyring)
    server.publish(bundle(partitions(ACME)), sequence=50)
    agent.cycle()
    old_epoch = dict(server.envelope)

    server.publish(bundle(partitions()), sequence=31, epoch=1)  # restored, then acme offboarded
    assert agent.cycle().outcome == "applied"
    assert load_state(conf_dir).installed_position == (1, 31)

    server.envelope = old_epoch
    assert agent.cycle().outcome == "refused"
    assert "position 0:50 is older than the installed one (1:31)" in server.reports[-1]["detail"]
    assert (conf_dir / "partitions.conf").read_text() == partitions()


def test_a_rotation_is_learned_at_a_later_cycle_when_the_transitions_were_unreadable(
    conf_dir, keyring
):
    server = FakeServer(NEW)
    server.publish(bundle(partitions(ACME)), sequence=21)
    agent = agent_for(conf_dir, server, keyring)
    server.transitions, server.transitions_down = [transition()], True

    assert agent.cycle().outcome == "refused"
    server.transitions_down = False  # the same manifest, and the statement can be read now

    assert agent.cycle().outcome == "applied"


def pem_pinned_agent(conf_dir: Path, server: FakeServer) -> Agent:
    """A new agent process pinned to the old key's PEM: it learns the rotation again."""
    pinned = replace(settings(conf_dir, OLD), keys=Trust.of([OLD.public_key()]))
    return Agent(pinned, server, FakeHost(conf_dir), clock=Clock(), rng=random.Random(7))


def test_a_restarted_agent_pinned_to_a_pem_still_refuses_replays_of_the_new_key(conf_dir):
    server = FakeServer(NEW, transitions=[transition()])
    server.publish(bundle(partitions(ACME)), sequence=25)
    old = dict(server.envelope)
    assert pem_pinned_agent(conf_dir, server).cycle().outcome == "applied"
    server.publish(bundle(partitions()), sequence=40)  # acme offboarded
    assert pem_pinned_agent(conf_dir, server).cycle().outcome == "applied"

    server.envelope = old  # replayed to an agent that learns the rotation again at start

    assert pem_pinned_agent(conf_dir, server).cycle().outcome == "refused"
    assert (conf_dir / "partitions.conf").read_text() == partitions()


def test_a_keyring_copied_by_hand_clears_a_forged_position_of_the_retired_key(conf_dir, keyring):
    server = FakeServer(OLD)
    server.publish(bundle(partitions(ACME)), sequence=LOCKOUT)  # stolen key, before rotation
    assert agent_for(conf_dir, server, keyring).cycle().outcome == "applied"
    retired = KeyringEntry.of("audit", public_pem(OLD.public_key())).retire(RETIRED_AT)
    successor = KeyringEntry.of("audit.r2", public_pem(NEW.public_key()))
    keyring.write_text(retired.line() + "\n" + successor.line() + "\n")  # the manual path

    server.publish(bundle(partitions()), sequence=25, key=NEW)

    assert agent_for(conf_dir, server, keyring).cycle().outcome == "applied"
    assert load_state(conf_dir).installed_position == (0, 25)
