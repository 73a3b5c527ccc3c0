"""The JSON API's OpenAPI document: every JSON route of the app is in it, with its pydantic models' schemas.

A route added under ``/console/api`` or ``/api/v1`` without :func:`gateway.console.openapi.describe` fails
here -- it would also be missing from what scripts and the fuzzer (``test_api_fuzz.py``) read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.console.openapi import described, endpoints
from gateway.console.tokens import MadeToken, NewToken
from gateway.http.app import build_app
from tests.console.rig import client, console_config, serve_console
from tests.console.test_tokens import bearer, made_token

JSON_PREFIXES = ("/console/api/", "/api/v1/")


def test_every_json_route_of_the_app_is_described(tmp_path: Path):
    app = build_app(Gateway(console_config(tmp_path)))
    found = [(path, method) for path, method, func in endpoints(app.routes) if path.startswith(JSON_PREFIXES)]
    assert len(found) >= 25, found  # the walk reached the mounted console, not just the top level
    missing = [f"{method.upper()} {path}" for path, method, func in endpoints(app.routes)
               if path.startswith(JSON_PREFIXES) and described(func, method) is None]
    assert missing == [], f"describe these routes (gateway.console.openapi.describe): {missing}"


@pytest.fixture
async def served(tmp_path: Path):
    async with serve_console(tmp_path / "data") as running:
        yield running


async def test_the_document_is_served_to_the_signed_in_and_lists_every_json_route(served):
    token = await made_token(served, "ada")
    async with client(served.url) as http:
        assert (await http.get("/console/api/openapi.json")).status_code == 401
        document = (await http.get("/console/api/openapi.json", headers=bearer(token))).json()
    assert document["openapi"].startswith("3.1")
    app_routes = {(path, method) for path, method, _ in endpoints(build_app(served.gateway).routes) if path.startswith(JSON_PREFIXES)}
    listed = {(path, method) for path, operations in document["paths"].items() for method in operations}
    assert listed == app_routes
    tokens = document["paths"]["/console/api/tokens"]
    assert tokens["post"]["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/NewToken"}
    assert tokens["post"]["responses"]["201"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/MadeToken"}
    assert document["components"]["schemas"]["NewToken"]["properties"] == NewToken.model_json_schema()["properties"]
    assert set(document["components"]["schemas"]["MadeToken"]["properties"]) == set(MadeToken.model_fields)
    assert document["paths"]["/console/api/dashboard"]["get"]["parameters"][0]["schema"]["enum"] == ["day", "week"]
    assert all("default" in op["responses"] for ops in document["paths"].values() for op in ops.values())
