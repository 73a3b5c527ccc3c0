"""The JSON API's OpenAPI document, made from the routes themselves and the pydantic models they answer with.

A JSON route says what it takes and answers where it is declared::

    Route("/api/channels", describe(console.guarded(listing, api=True),
                                    get=Operation("The channel accounts in sight", answers=ChannelList)))

:func:`describe` files the :class:`Operation` of each method under the endpoint function; :func:`openapi`
walks the app's router with Starlette's own route walker (``BaseSchemaGenerator.get_endpoints``: mounts
joined, converters dropped) and writes one operation per described method, its bodies' schemas from
pydantic's :func:`~pydantic.json_schema.models_json_schema` as shared components.  Nothing is written by
hand but the summaries, so a model that changes changes the document, and a JSON route nobody described
is missing from it -- which ``tests/console/test_openapi.py`` refuses.

Every error is the gateway's one shape, ``{"error": "..."}`` (:func:`gateway.http.responses.error_response`):
it is the ``default`` response of every operation, so a status an operation does not list still has its
body checked.  Routes are reached with the console's session cookie or an API token as
``Authorization: Bearer`` (ADR 0041); both are declared as security schemes.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema
from starlette.routing import BaseRoute
from starlette.schemas import BaseSchemaGenerator

F = TypeVar("F", bound=Callable[..., Any])
Method = Literal["get", "post", "put", "delete"]
VERSION = "3.1.0"
REF = "#/components/schemas/{model}"
_PATH_PARAM = re.compile(r"{(\w+)}")


class ErrorBody(BaseModel):
    """Every error the gateway's port answers: one sentence saying what was wrong and, where it can, the fix."""

    error: str


@dataclass(frozen=True)
class Operation:
    """One method of one JSON route: what it takes and what it answers, as the models its handler uses."""

    summary: str
    answers: type[BaseModel] | None = None
    """The body of a success; None for one that is not JSON (``media``)."""
    status: tuple[int, ...] = (200,)
    """The success statuses (an upload: 201 for a new document, 200 for a replaced one)."""
    body: type[BaseModel] | None = None
    """A JSON request body."""
    form: type[BaseModel] | None = None
    """An ``application/x-www-form-urlencoded`` request body."""
    upload: type[BaseModel] | None = None
    """A ``multipart/form-data`` request body (a field of ``format: binary`` is a file)."""
    query: type[BaseModel] | None = None
    """The query parameters, one field each."""
    path: type[BaseModel] | None = None
    """Path parameters with a narrower shape than any string (a closed set of actions), one field each."""
    media: str = "application/json"
    """The success's content type."""
    outcome: type[BaseModel] | None = None
    """A refusal's body where it is not an :class:`ErrorBody` (an account the channel's probe refused lists its problems)."""


_DESCRIBED: weakref.WeakKeyDictionary[Callable[..., Any], dict[str, Operation]] = weakref.WeakKeyDictionary()
"""Held weakly: each console built (every served gateway, every test) makes its own endpoints, gone with it."""


def describe(endpoint: F, **operations: Operation) -> F:
    """File ``operations`` (by lower-case method: ``get=``, ``post=``...) under ``endpoint``; returns it unchanged."""
    _DESCRIBED.setdefault(endpoint, {}).update(operations)
    return endpoint


def described(endpoint: Callable[..., Any], method: str) -> Operation | None:
    return _DESCRIBED.get(endpoint, {}).get(method.lower())


class _Walker(BaseSchemaGenerator):
    def get_schema(self, routes: list[BaseRoute]) -> dict[str, Any]:  # pragma: no cover - unused: openapi() below
        raise NotImplementedError


def endpoints(routes: Sequence[BaseRoute]) -> list[tuple[str, str, Callable[..., Any]]]:
    """(path, lower-case method, endpoint) of every route, mounts joined and converters dropped."""
    return [(e.path, e.http_method, e.func) for e in _Walker().get_endpoints(list(routes))]


def openapi(routes: Sequence[BaseRoute], title: str, version: str) -> dict[str, Any]:
    """The OpenAPI document of every described endpoint under ``routes``."""
    found = [(path, method, op) for path, method, func in endpoints(routes) if (op := described(func, method)) is not None]
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [(ErrorBody, "serialization")]
    for _, _, op in found:
        wanted += [(model, "validation") for model in (op.body, op.form, op.upload, op.query) if model is not None]
        wanted += [(model, "serialization") for model in (op.answers, op.outcome) if model is not None]
    wanted = list(dict.fromkeys(wanted))
    refs, defs = models_json_schema(wanted, ref_template=REF)
    schemas = defs.get("$defs", {})

    def ref(model: type[BaseModel], mode: JsonSchemaMode) -> dict[str, Any]:
        return refs[(model, mode)]

    paths: dict[str, dict[str, Any]] = {}
    for path, method, op in found:
        paths.setdefault(path, {})[method] = _operation(path, method, op, ref)
    return {
        "openapi": VERSION,
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "token": {"type": "http", "scheme": "bearer", "description": "an API token made at /console/tokens"},
                "session": {"type": "apiKey", "in": "cookie", "name": "partners_console",
                            "description": "a signed-in browser; unsafe methods also need its X-CSRF-Token"},
            },
        },
        "security": [{"token": []}, {"session": []}],
    }


def _operation(path: str, method: str, op: Operation, ref: Callable[[type[BaseModel], JsonSchemaMode], dict[str, Any]]
               ) -> dict[str, Any]:
    shaped = op.path.model_json_schema(ref_template=REF).get("properties", {}) if op.path is not None else {}
    parameters: list[dict[str, Any]] = [{"name": name, "in": "path", "required": True, "schema": shaped.get(name, {"type": "string"})}
                                        for name in _PATH_PARAM.findall(path)]
    if op.query is not None:
        shape = op.query.model_json_schema(ref_template=REF)
        required = set(shape.get("required", ()))
        parameters += [{"name": name, "in": "query", "required": name in required, "schema": schema}
                       for name, schema in shape.get("properties", {}).items()]
    success: dict[str, Any] = {"schema": ref(op.answers, "serialization")} if op.answers is not None else {}
    responses: dict[str, Any] = {str(status): {"description": op.summary, "content": {op.media: success}} for status in op.status}
    refusal = ref(ErrorBody, "serialization")
    if op.outcome is not None:
        refusal = {"anyOf": [refusal, ref(op.outcome, "serialization")]}
    responses["default"] = {"description": "an error, in one sentence", "content": {"application/json": {"schema": refusal}}}
    operation: dict[str, Any] = {"summary": op.summary, "operationId": _operation_id(method, path), "responses": responses}
    if parameters:
        operation["parameters"] = parameters
    bodies = {kind: {"schema": ref(model, "validation")}
              for kind, model in (("application/json", op.body), ("application/x-www-form-urlencoded", op.form),
                                  ("multipart/form-data", op.upload)) if model is not None}
    if bodies:
        operation["requestBody"] = {"required": True, "content": bodies}
    return operation


def _operation_id(method: str, path: str) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", "_", path.replace("{", "by_").replace("}", "")).strip("_")
    return f"{method}_{words}"
