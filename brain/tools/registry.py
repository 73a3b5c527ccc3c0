"""The tools a brain knows, as specs for the model and as one safe ``call``.

``call`` is the only way a tool runs, and it never raises for anything the
model or the tool did: a tool outside the turn's surface, JSON that does not
parse, arguments that do not validate, a timeout and an exception inside the
tool all come back as ``ToolResult(is_error=True)`` with a message the model
can act on.  Exception text goes to the log, never to the model (it may hold
paths, addresses or secrets).  Cancellation still propagates.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Iterable
from functools import cache
from typing import Any

from pydantic import ValidationError

from brain.tools.base import Tool, ToolArguments, ToolContext, ToolResult
from brain.types import ToolCall, ToolSpec

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI-style APIs accept as a function name


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = (), *, timeout_s: float = 30.0, max_result_chars: int = 16_000):
        self._tools: dict[str, Tool] = {}
        self.timeout_s = timeout_s
        self.max_result_chars = max_result_chars
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        name = tool.name
        if not _NAME.match(name):
            raise ValueError(f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'")
        if name in self._tools:
            raise ValueError(f"a tool named {name!r} is already registered")
        if not (isinstance(tool.Arguments, type) and issubclass(tool.Arguments, ToolArguments)):
            raise TypeError(f"{name}.Arguments must subclass ToolArguments (unknown arguments must be rejected)")
        if tool.Arguments.model_config.get("extra") != "forbid":
            raise TypeError(f"{name}.Arguments must keep extra='forbid'")
        self._tools[name] = tool

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._tools)

    def defaults(self) -> frozenset[str]:
        """Tools a partner has unless its config lists its own (everything but opt-in tools)."""
        return frozenset(name for name, tool in self._tools.items() if tool.default_enabled)

    def unknown(self, names: Iterable[str]) -> list[str]:
        """Names that no registered tool answers to -- for config checks at startup."""
        return sorted(set(names) - self._tools.keys())

    def specs(self, names: Iterable[str]) -> list[ToolSpec]:
        """Specs for ``names`` in registration order (a stable prompt); unknown names raise KeyError."""
        wanted = set(names)
        missing = self.unknown(wanted)
        if missing:
            raise KeyError(f"no tool named {', '.join(missing)} (registered: {', '.join(self._tools)})")
        specs: list[ToolSpec] = []
        for name, tool in self._tools.items():
            if name in wanted:
                arguments: type[ToolArguments] = tool.Arguments  # any tool's model, as ``register`` checked
                specs.append(ToolSpec(name=name, description=tool.description, parameters=parameters_schema(arguments)))
        return specs

    async def call(self, tool_call: ToolCall, context: ToolContext) -> ToolResult:
        name = tool_call.name
        tool = self._tools.get(name)
        if tool is None or name not in context.surface:
            why = "not in this turn's surface" if tool else "no such tool"
            logger.info("tool refused partner=%s tool=%s reason=%r", context.partner, name, why)
            available = ", ".join(sorted(context.surface)) or "none"
            return ToolResult.error(f"The tool {name!r} is not available in this conversation. Available tools: {available}.")
        args = _parse(tool, tool_call.arguments)
        if isinstance(args, ToolResult):
            logger.info("tool arguments rejected partner=%s tool=%s", context.partner, name)
            return args
        logger.debug("tool call partner=%s tool=%s arguments=%s", context.partner, name, tool_call.arguments)
        started = time.monotonic()
        result = await self._run(tool, args, context)
        elapsed_ms = round((time.monotonic() - started) * 1000)
        logger.info("tool done partner=%s tool=%s error=%s ms=%d", context.partner, name, result.is_error, elapsed_ms)
        if len(result.text) > self.max_result_chars:
            text = result.text[: self.max_result_chars] + "\n[truncated]"
            result = ToolResult(text=text, citations=result.citations, is_error=result.is_error)
        return result

    async def _run(self, tool: Tool, args: ToolArguments, context: ToolContext) -> ToolResult:
        limit = tool.timeout_s if tool.timeout_s is not None else self.timeout_s
        try:
            async with asyncio.timeout(limit) as deadline:
                result = await tool.run(args, context)
        except TimeoutError:
            if not deadline.expired():
                logger.warning("tool failed partner=%s tool=%s", context.partner, tool.name, exc_info=True)
                return ToolResult.error(_FAILED.format(name=tool.name))
            logger.warning("tool timed out partner=%s tool=%s after_s=%g", context.partner, tool.name, limit)
            return ToolResult.error(f"The tool {tool.name!r} took longer than {limit:g} s and was stopped.")
        except Exception:
            logger.warning("tool failed partner=%s tool=%s", context.partner, tool.name, exc_info=True)
            return ToolResult.error(_FAILED.format(name=tool.name))
        if not isinstance(result, ToolResult):
            logger.warning("tool returned %s, not a ToolResult tool=%s", type(result).__name__, tool.name)
            return ToolResult.error(_FAILED.format(name=tool.name))
        return result


_FAILED = "The tool {name!r} failed with an internal error (logged for the operator). Do not retry it this turn."


def _parse(tool: Tool, raw: str) -> ToolArguments | ToolResult:
    """Validate the model's JSON against the tool's argument model, or explain what to fix."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as error:
        return ToolResult.error(
            f"The arguments for {tool.name!r} are not valid JSON ({error.msg} at position {error.pos}). "
            "Send one JSON object."
        )
    if not isinstance(data, dict):
        return ToolResult.error(f"The arguments for {tool.name!r} must be a JSON object, not {type(data).__name__}.")
    try:
        return tool.Arguments.model_validate(data)
    except ValidationError as error:
        allowed = ", ".join(tool.Arguments.model_fields) or "none"
        problems = "; ".join(_problem(item, allowed) for item in error.errors(include_url=False))
        return ToolResult.error(f"Invalid arguments for {tool.name!r}: {problems}. Its arguments are: {allowed}.")


def _problem(item: Any, allowed: str) -> str:
    where = ".".join(str(p) for p in item["loc"]) or "arguments"
    if item["type"] == "extra_forbidden":
        return f"{where!r} is not an argument of this tool"
    if item["type"] == "missing":
        return f"{where!r} is required"
    return f"{where!r}: {item['msg'].removeprefix('Value error, ')}"


@cache
def parameters_schema(model: type[ToolArguments]) -> dict[str, Any]:
    """The argument model's JSON schema as function-calling APIs like it.

    Titles go (noise in the prompt), ``$ref`` is inlined (some providers reject
    it), and an optional field's ``anyOf [X, null]`` becomes plain ``X``.
    """
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})
    return _clean(schema, defs)


_VALUES = {"default", "examples", "enum", "const"}  # data, not schema: copied as is


def _clean(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_clean(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _clean(merged, defs)
    options = node.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        (kept,) = [o for o in options if o != {"type": "null"}]
        node = {**{k: v for k, v in node.items() if k != "anyOf"}, **kept}
        if node.get("default", ...) is None:
            del node["default"]
        return _clean(node, defs)
    cleaned: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            cleaned[key] = {field: _clean(sub, defs) for field, sub in value.items()}
        elif key in _VALUES:
            cleaned[key] = value
        else:
            cleaned[key] = _clean(value, defs)
    return cleaned
