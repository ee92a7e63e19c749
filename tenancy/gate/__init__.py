"""Layer 4, the commit gate: every write is verified here; verdicts are served once per state.

Every write is verified here before it commits (the commit gate, incremental digests,
full checks), what-if rehearsals report without committing, and verdicts are served once
per state. It builds on `tenancy.record`, `tenancy.technology` and `tenancy.store`.

`__all__` names the modules of this layer; importing the package imports none of them.
"""

__all__ = [
    "cached_reads",
    "change_batch",
    "change_check",
    "full_check",
    "shown_verdict",
    "verdict_warmth",
    "verification",
    "what_if",
]
