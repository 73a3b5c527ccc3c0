"""The registry: specs for the model, and a call that validates, scopes and never raises."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from brain.tools.base import Tool, ToolArguments, ToolContext, ToolResult, ToolServices
from brain.tools.builtin.knowledge import KnowledgeSearchTool
from brain.tools.registry import ToolRegistry, parameters_schema
from brain.tools.services import Passage
from brain.types import ToolCall
from gateway.core.config import PartnerConfig
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.turns import Role, Turn


def make_context(tools: set[str], **services: Any) -> ToolContext:
    address = Address(channel="telegram", account="default", conversation=Conversation(chat="alice", kind=ConversationKind.DIRECT))
    sender = Sender(user="alice")
    message = InboundMessage(event_id="e1", address=address, sender=sender, elements=(Text(text="hi"),), received_at=datetime.now(UTC))
    turn = Turn(partner=PartnerConfig(id="tutor", name="Tutor"), address=address, sender=sender, role=Role.LEARNER, messages=[message])
    return ToolContext(partner="tutor", turn=turn, surface=frozenset(tools), services=ToolServices(**services))


class Level(str, Enum):
    EASY = "easy"
    HARD = "hard"


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    page: int | None = None


class Echo(Tool):
    name = "echo"
    description = "Say it back."
    calls = 0

    class Arguments(ToolArguments):
        text: str = Field(min_length=1)
        times: int = Field(default=1, ge=1, le=3)

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        Echo.calls += 1
        return ToolResult(text=args.text * args.times)


class Broken(Tool):
    name = "broken"
    description = "Always fails."

    class Arguments(ToolArguments):
        pass

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        raise RuntimeError("db password hunter2 at /srv/secret.db")


class Slow(Tool):
    name = "slow"
    description = "Never finishes in time."
    timeout_s = 0.05

    class Arguments(ToolArguments):
        pass

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        await asyncio.sleep(10)
        return ToolResult(text="late")


class InnerTimeout(Tool):
    name = "inner_timeout"
    description = "Its own I/O times out."

    class Arguments(ToolArguments):
        pass

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        raise TimeoutError("upstream at 10.0.0.5 timed out")


class Wrong(Tool):
    name = "wrong"
    description = "Returns the wrong type."

    class Arguments(ToolArguments):
        pass

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        return "plain string"  # type: ignore[return-value]


class Rich(Tool):
    name = "rich"
    description = "Nested arguments."

    class Arguments(ToolArguments):
        title: str
        level: Level = Level.EASY
        source: Source | None = None
        tags: list[str] = []

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        return ToolResult(text="ok")


@pytest.fixture
def registry() -> ToolRegistry:
    Echo.calls = 0
    return ToolRegistry([Echo(), Broken(), Slow(), InnerTimeout(), Wrong(), Rich()])


def call(name: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


# --------------------------------------------------------------------------- specs


def _keys(node: Any, under: str = "") -> list[tuple[str, str]]:
    if isinstance(node, dict):
        found = [(under, k) for k in node]
        for key, value in node.items():
            found += _keys(value, key)
        return found
    if isinstance(node, list):
        return [pair for item in node for pair in _keys(item, under)]
    return []


def test_specs_are_clean_json_schema(registry):
    (spec,) = registry.specs({"rich"})
    params = spec.parameters
    assert spec.name == "rich" and spec.description == "Nested arguments."
    assert [k for parent, k in _keys(params) if k == "title" and parent != "properties"] == []
    assert "title" in params["properties"]  # a field called title survives
    assert "$defs" not in params and "$ref" not in str(params)
    assert params["properties"]["level"]["enum"] == ["easy", "hard"]
    assert params["properties"]["source"]["type"] == "object"
    assert params["properties"]["source"]["additionalProperties"] is False
    assert params["additionalProperties"] is False and params["required"] == ["title"]


def test_optional_fields_read_as_their_type():
    params = parameters_schema(Rich.Arguments)
    source = params["properties"]["source"]
    assert "anyOf" not in source and "default" not in source
    assert source["properties"]["page"] == {"type": "integer"}


def test_specs_follow_registration_order_and_refuse_unknown_names(registry):
    assert [s.name for s in registry.specs({"rich", "echo"})] == ["echo", "rich"]
    with pytest.raises(KeyError, match="nope"):
        registry.specs({"echo", "nope"})
    assert registry.unknown({"echo", "nope"}) == ["nope"]


def test_register_refuses_duplicates_bad_names_and_lax_arguments():
    registry = ToolRegistry([Echo()])
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Echo())

    class Lax(Echo):
        name = "lax"

        class Arguments(ToolArguments):
            model_config = ConfigDict(extra="ignore")

    class Spaced(Echo):
        name = "two words"

    with pytest.raises(TypeError, match="extra='forbid'"):
        registry.register(Lax())
    with pytest.raises(ValueError, match="must be 1-64"):
        registry.register(Spaced())


# --------------------------------------------------------------------------- call


async def test_a_valid_call_runs(registry):
    result = await registry.call(call("echo", '{"text": "ab", "times": 2}'), make_context({"echo"}))
    assert result == ToolResult(text="abab")


async def test_empty_arguments_mean_an_empty_object(registry):
    result = await registry.call(call("echo", ""), make_context({"echo"}))
    assert result.is_error and "'text' is required" in result.text


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"text": "a"', "not valid JSON"),
        ("[1, 2]", "must be a JSON object, not list"),
        ('"hello"', "must be a JSON object, not str"),
        ("{}", "'text' is required"),
        ('{"text": "a", "user": "bob"}', "'user' is not an argument of this tool"),
        ('{"text": "a", "times": 9}', "'times': Input should be less than or equal to 3"),
        ('{"text": "a", "times": "many"}', "'times': Input should be a valid integer"),
        ('{"text": "   "}', "'text': String should have at least 1 character"),
    ],
)
async def test_bad_arguments_come_back_as_errors_the_model_can_act_on(registry, arguments, expected):
    result = await registry.call(call("echo", arguments), make_context({"echo"}))
    assert result.is_error
    assert expected in result.text
    assert "Its arguments are: text, times" in result.text or "JSON" in result.text
    assert Echo.calls == 0


async def test_a_tool_outside_the_surface_is_refused_without_running(registry, caplog):
    with caplog.at_level(logging.INFO, logger="brain.tools.registry"):
        result = await registry.call(call("echo", '{"text": "a"}'), make_context({"rich"}))
    assert result.is_error
    assert "'echo' is not available in this conversation. Available tools: rich." in result.text
    assert "tool refused partner=tutor tool=echo" in caplog.text
    assert Echo.calls == 0


async def test_an_unknown_tool_is_refused(registry):
    result = await registry.call(call("teleport"), make_context({"echo", "teleport"}))
    assert result.is_error and "'teleport' is not available" in result.text


async def test_an_exception_becomes_a_generic_error_and_is_logged(registry, caplog):
    with caplog.at_level(logging.WARNING, logger="brain.tools.registry"):
        result = await registry.call(call("broken"), make_context({"broken"}))
    assert result.is_error and "internal error" in result.text
    assert "hunter2" not in result.text and "secret" not in result.text
    assert "hunter2" in caplog.text


async def test_a_slow_tool_is_stopped_at_its_timeout(registry):
    result = await registry.call(call("slow"), make_context({"slow"}))
    assert result.is_error and "took longer than 0.05 s" in result.text


async def test_a_timeout_inside_the_tool_is_a_failure_not_the_deadline(registry):
    result = await registry.call(call("inner_timeout"), make_context({"inner_timeout"}))
    assert result.is_error and "internal error" in result.text and "10.0.0.5" not in result.text


async def test_a_result_of_the_wrong_type_is_an_error(registry):
    result = await registry.call(call("wrong"), make_context({"wrong"}))
    assert result.is_error and "internal error" in result.text


async def test_long_results_are_cut():
    registry = ToolRegistry([Echo()], max_result_chars=50)
    result = await registry.call(call("echo", '{"text": "' + "x" * 40 + '", "times": 3}'), make_context({"echo"}))
    assert result.text == "x" * 50 + "\n[truncated]"


async def test_cancellation_still_propagates(registry):
    task = asyncio.create_task(ToolRegistry([Slow()], timeout_s=5).call(call("slow"), make_context({"slow"})))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_validation_errors_from_a_builtin_name_its_limit():
    class Search:
        async def search(self, partner_id: str, query: str, limit: int) -> list[Passage]:
            return []

    registry = ToolRegistry([KnowledgeSearchTool()])
    result = await registry.call(
        call("knowledge_search", '{"query": "fractions", "limit": 9}'),
        make_context({"knowledge_search"}, knowledge=Search()),
    )
    assert result.is_error and "'limit': Input should be less than or equal to 8" in result.text
