"""The API tier's backends.

The tenancy tier runs every use case on SQLite and PostgreSQL. API modules listed here test HTTP
concerns (authorization, problem shapes, content types, headers, status codes and bodies of the
use cases the tenancy tier already runs on both backends: tests/tenancy/test_<subject>...) and
run on SQLite alone; on PostgreSQL they would repeat that tier through HTTP and cost minutes of
the suite's 10-minute budget. Modules whose behaviour depends on the database (column types and
lengths, strict numbers at the column's limits, idempotency records, RoCE ids, deployment and
drains) are not listed and keep both backends.
"""

from __future__ import annotations

import pytest

HTTP_ONLY_MODULES = frozenset(
    {
        "test_allocations",
        "test_authz_matrix",
        "test_cached_reads_http",
        "test_config_audits",
        "test_content_type",
        "test_deploy_http",
        "test_docs_offline",
        "test_event_loop",
        "test_fabrics",
        "test_head_and_hostile_paths",
        "test_history",
        "test_hostile_bodies",
        "test_node_state",
        "test_nodes",
        "test_offboarding",
        "test_partitions",
        "test_open_mode",
        "test_pagination",
        "test_policy_hostile",
        "test_port_identity",
        "test_problem_pages",
        "test_problem_table",
        "test_problems_and_auth",
        "test_proof_redaction",
        "test_proofs",
        "test_readyz",
        "test_request_id",
        "test_responses",
        "test_services_and_grants",
        "test_tenants_and_qos",
        "test_token_lineage",
        "test_tokens",
        "test_topology",
        "test_ufm_auth",
        "test_ufm_facade",
        "test_usage",
        "test_validation_words",
        "test_verification_and_artifacts",
    }
)


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Pin `database_url` to SQLite for the HTTP-only modules, before fixtures parametrize it.

    A parametrize mark on the test takes precedence over the fixture's own params (pytest's
    rule), so the PostgreSQL variant is never generated: nothing is skipped or deselected.
    """
    module = metafunc.module.__name__.rpartition(".")[2]
    if module in HTTP_ONLY_MODULES and "database_url" in metafunc.fixturenames:
        mark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True, ids=["sqlite"])
        metafunc.definition.add_marker(mark)
