"""Property-based API testing with schemathesis against the app's own OpenAPI document.

Every operation gets generated requests (valid and invalid) on an onboarded demo state; the
checks are the ones the service promises: no 5xx, every documented status and content type
(errors are application/problem+json), and bodies that match the response schemas.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from cli import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY
from tenancy.schemas import TokenCreate
from tenancy.store.settings import Settings
from tenancy.usecases.demo import load_demo
from tenancy.usecases.tokens import create_token
from tests.keys import key_settings, register_key

OPERATOR_TOKEN = "schemathesis-operator"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

app = create_app(key_settings(Settings(database_url="sqlite://", admin_token=OPERATOR_TOKEN)))
register_key(app.state.uow.engine)  # `isofabric keys create`: checkpoints and proofs are signed
load_demo(
    app.state.uow,
    topology_text=DEMO_TOPOLOGY.read_text(),
    roce_inventory_text=DEMO_ROCE_INVENTORY.read_text(),
)
TENANT_TOKEN = create_token(
    app.state.uow, spec=TokenCreate(name="schemathesis", role="tenant-admin", tenant="acme")
).token
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


@schema.parametrize()
@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_operator_requests_never_fail_and_match_the_schema(case):
    case.call_and_validate(headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}, checks=CHECKS)


@schema.parametrize()
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_tenant_admin_requests_never_fail_and_match_the_schema(case):
    """A tenant role gets its own data, 403 or a 404 for the rest, never a 5xx."""
    case.call_and_validate(headers={"Authorization": f"Bearer {TENANT_TOKEN}"}, checks=CHECKS)
