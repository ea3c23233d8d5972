"""Property tests of the live API from its own OpenAPI schema (Schemathesis): whatever a client sends, with a
valid token or without one, the service never answers 5xx, every answer matches the schema it publishes,
and a refused request stores nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from servicekit import start_service, stop_service, wait_for_server

from dlsched.service.store import Store

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, negative_data_rejection]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Store, str, str]]:
    """A live ``dlsched serve`` (its own process, the dry-run executor, rounds every second) and a second
    handle on its database, through which the test counts what got stored."""
    state = tmp_path_factory.mktemp("schemathesis") / "state"
    proc = start_service(state, "--executor", "dry-run", "--round-s", "1")
    try:
        info = wait_for_server(state, proc)
        store = Store.open(state)
        token = store.add_user("alice")
        schema = schemathesis.openapi.from_url(info["url"] + "/openapi.json")
        yield schema, store, token, info["url"]
        store.close()
        assert proc.poll() is None, "the service died under the generated requests"
    finally:
        stop_service(proc)


def _cases(schema: Any, mode: GenerationMode, headers: dict[str, str] | None) -> st.SearchStrategy[Any]:
    """Cases of every operation, with the token given (if any) left as it is; a followed log is never
    asked for (it streams until its job ends)."""
    strategies = []
    for result in schema.get_all_operations():
        operation = result.ok()
        query = {"follow": "false"} if operation.path.endswith("/logs") else None
        strategies.append(operation.as_strategy(generation_mode=mode, query=query, headers=headers))
    return st.one_of(strategies)


@pytest.mark.parametrize("with_token", [True, False], ids=["token", "no-token"])
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["positive", "negative"])
@pytest.mark.timeout(240)
def test_the_api_conforms_to_its_schema(api: tuple[Any, Store, str, str], mode: GenerationMode, with_token: bool):
    _, store, token, url = api
    schema = schemathesis.openapi.from_url(url + "/openapi.json")  # its own: the token is registered on it
    if with_token:  # as the schema's auth, so Schemathesis knows the token is a real one (POST /v1/jobs has
        # a header parameter of its own, Idempotency-Key, beside which a token passed as a header reads as generated)
        @schema.auth()
        class _Bearer:
            def get(self, case: Any, context: Any) -> str:
                return token

            def set(self, case: Any, data: str, context: Any) -> None:
                case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}

    headers = None
    checks = CHECKS + ([ignored_auth] if with_token else [])
    seen: set[int] = set()

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(case=_cases(schema, mode, headers))
    def run(case: Any) -> None:
        before = store.count_jobs()
        response = case.call_and_validate(checks=checks, timeout=30)
        seen.add(response.status_code)
        created = response.status_code == 201 and case.method.upper() == "POST"
        assert store.count_jobs() == before + (1 if created else 0), (response.status_code, response.text[:300])
        if not with_token and case.path != "/healthz":  # refused: no token, or a body it cannot even read
            assert response.status_code in (400, 401, 404, 405, 422), (case.path, response.status_code)

    run()
    # the examples reached the routes: refused without a token, answered with one, invalid data refused
    expected = 401 if not with_token else 200 if mode is GenerationMode.POSITIVE else 422
    assert expected in seen, seen


def test_the_schema_declares_the_bearer_scheme(api: tuple[Any, Store, str, str]):
    raw = api[0].raw_schema
    assert raw["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert "security" not in raw["paths"]["/healthz"]["get"]
    assert raw["paths"]["/v1/jobs"]["post"]["security"] == [{"HTTPBearer": []}]
