"""Property-based fuzzing of the JSON API from its own OpenAPI document: no request gets a 500.

Schemathesis reads ``/console/api/openapi.json`` from a real gateway served on loopback (the console rig with
its own brain, three learners and a document, so the learners and knowledge routes run their real code), then
sends each operation :data:`EXAMPLES` requests of valid data, and as many of invalid data to each that reads a
body or a query -- path parameters, queries and bodies drawn from the operation's schemas, or made to break
them -- with an administrator's API token, with a teacher's, and with a teacher's signed-in session (cookie
and CSRF header: the one way to make a token). Every answer must be a non-5xx whose body matches the schema of
its status (an error's is ``{"error"}``). The fuzzer is told the names that exist (partner, learner and
document ids) beside any string, so it gets past "no such partner" as often as not. New routes are picked up
from the document: a route described there is fuzzed without a line here. Derandomized, so a run is the same
every time and a failure can be replayed.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import APIOperation, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from gateway.console.signin import SESSION_COOKIE
from tests.console.rig import ALL_PARTNERS, csrf_of, serve_console, signed_in
from tests.console.test_learners import seed
from tests.console.test_tokens import made_token
from tests.waits import HTTP_S

EXAMPLES = 30
"""Per operation and token: enough to reach every branch of a route's input checks, few enough for a loaded 2-core machine."""


def told(document: dict[str, Any], known: dict[str, list[str]]) -> dict[str, Any]:
    """The document with each path parameter named in ``known`` drawn from those values or any string."""
    for operations in document["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", ()):
                if parameter["in"] == "path" and parameter["name"] in known:
                    parameter["schema"] = {"anyOf": [{"enum": known[parameter["name"]]}, parameter["schema"]]}
    return document


def takes_input(operation: APIOperation) -> bool:
    """Whether it reads a body or a query: invalid data of those is worth sending (a path parameter is any string)."""
    return bool(operation.body) or bool(operation.query)


def fuzz(url: str, auth: dict[str, str], cookies: dict[str, str], known: dict[str, list[str]]) -> tuple[list[str], int]:
    """Every operation's failures, as "METHOD /path: what failed" (empty: none), and how many answers were 2xx."""
    document = httpx.get(f"{url}/console/api/openapi.json", headers=auth, cookies=cookies, timeout=HTTP_S,
                         trust_env=False).json()
    schema = schemathesis.openapi.from_dict(told(document, known))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20, [op.label for op in operations]  # the document lists the API, not an empty shell
    failures: list[str] = []
    succeeded = 0
    for operation, mode in ((op, mode) for op in operations for mode in GenerationMode
                            if mode is GenerationMode.POSITIVE or takes_input(op)):
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def run(case: schemathesis.Case) -> None:
            nonlocal succeeded
            response = case.call(base_url=url, headers=auth, cookies=cookies, timeout=HTTP_S)
            succeeded += response.status_code < 300
            case.validate_response(response, checks=[not_a_server_error, response_schema_conformance], headers=auth)

        try:
            run()
        except Exception as failure:  # a failed check, with the request that made it
            failures.append(f"{operation.label} ({mode.value} data): {str(failure)[:2000]}")
    return failures, succeeded


async def test_fuzzed_requests_get_no_500_and_answers_match_the_schema(tmp_path: Path):
    notes = tmp_path / "fractions.md"
    notes.write_text("# Fractions\n\nA half is one of two equal parts.\n", encoding="utf-8")
    async with serve_console(tmp_path / "data", own_brain=True) as served:
        people = await seed(served.gateway)
        [added] = await served.gateway.knowledge.add("algebra", [notes])
        assert added.document is not None
        known = {"partner": ALL_PARTNERS, "person": sorted(people.values()), "doc": [added.document.doc_id]}
        ways = {username: ({"Authorization": f"Bearer {await made_token(served, username)}"}, {}) for username in ("root", "ada")}
        async with aclosing(await signed_in(served.url, "ben")) as ben:
            ways["ben's session"] = ({"X-CSRF-Token": await csrf_of(ben)}, {SESSION_COOKIE: ben.cookies[SESSION_COOKIE]})
            for who, (headers, cookies) in ways.items():
                failures, succeeded = await asyncio.to_thread(fuzz, served.url, headers, cookies, known)
                assert failures == [], f"as {who}:\n" + "\n\n".join(failures)
                assert succeeded > 50, succeeded  # the fuzzer got past the front doors, not only 401s and 404s
