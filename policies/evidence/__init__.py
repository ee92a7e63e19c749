"""Evidence an auditor can check offline: the audit log and isolation proofs.

The Merkle audit log with its signed checkpoints, and isolation proofs (in-toto statements in
DSSE envelopes) whose claims follow from the artifacts.

Sits above both technologies: claims and proof checks read InfiniBand and RoCE artifacts.
"""

from policies.evidence.audit_log import LogReport, parse_export, verify_log
from policies.evidence.claims import claims_for
from policies.evidence.merkle import (
    inclusion_proof,
    root_hash,
    verify_consistency,
    verify_inclusion,
)
from policies.evidence.proofs import build_statement, check_claims, sign_envelope, verify_envelope
from policies.evidence.signed_note import Checkpoint, sign_note, verify_note

__all__ = [
    "Checkpoint",
    "LogReport",
    "build_statement",
    "check_claims",
    "claims_for",
    "inclusion_proof",
    "parse_export",
    "root_hash",
    "sign_envelope",
    "sign_note",
    "verify_consistency",
    "verify_envelope",
    "verify_inclusion",
    "verify_log",
    "verify_note",
]
