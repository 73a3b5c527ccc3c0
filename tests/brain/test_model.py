"""The model seam through real litellm, over HTTP, to the scripted stub on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from brain.markup import OutputFilter
from brain.model import (
    LitellmClient,
    ModelError,
    ModelErrorKind,
    ModelQuirks,
    Quirk,
    RetryPolicy,
    ToolsUnsupported,
    classify,
    load_litellm,
)
from brain.types import ChatMessage, FinishReason, ModelRequest, ModelResult, TextDelta, ToolCall, ToolSpec
from gateway.core.config import ModelSettings
from tests.peers.model_stub import DIMENSIONS, ModelStub, ModelStubProcess, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")  # as load_litellm() does, per test

ROOT = Path(__file__).resolve().parents[2]
LOOKUP = ToolSpec(name="lookup", description="Look a topic up in the course notes.",
                  parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
HELLO = (ChatMessage(role="system", content="You are a tutor."), ChatMessage(role="user", content="hello"))


@pytest.fixture
async def stub():
    async with ModelStub() as running:
        yield running


class Sleeps(list):
    """An injected sleep that only records how long it was asked to wait."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps():
    return Sleeps()


@pytest.fixture
def client(sleeps):
    return LitellmClient(ModelQuirks(), sleep=sleeps, draw=lambda: 0.5)


def settings(stub: ModelStub, model: str = "openai/stub-model", **extra) -> ModelSettings:
    return ModelSettings(model=model, api_base=stub.api_base, api_key=SecretStr("sk-test"), **{"timeout_s": 5, **extra})


def request(stub: ModelStub, messages=HELLO, tools=(), **extra) -> ModelRequest:
    return ModelRequest(settings=settings(stub, **extra), messages=messages, tools=tools)


async def run(client: LitellmClient, req: ModelRequest) -> tuple[list[str], ModelResult]:
    deltas, results = [], []
    async for item in client.stream(req):
        if isinstance(item, TextDelta):
            assert not results, "no text after the result"
            deltas.append(item.text)
        else:
            results.append(item)
    assert len(results) == 1, "exactly one ModelResult"
    return deltas, results[0]


async def fails(client: LitellmClient, req: ModelRequest) -> ModelError:
    with pytest.raises(ModelError) as caught:
        await run(client, req)
    return caught.value


# --------------------------------------------------------------------------- answers


async def test_streamed_text_is_reassembled(stub, client):
    stub.script(Reply.text("The quick brown fox jumps over the lazy dog.", chunk=3))
    deltas, result = await run(client, request(stub))
    assert len(deltas) > 5 and "".join(deltas) == result.text == "The quick brown fox jumps over the lazy dog."
    assert result.finish_reason is FinishReason.STOP and result.tool_calls == ()
    assert result.model == "openai/stub-model"
    sent = stub.requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["model"] == "stub-model"
    assert sent["messages"] == [{"role": "system", "content": "You are a tutor."}, {"role": "user", "content": "hello"}]
    assert "tools" not in sent


async def test_native_tool_calls_streamed_in_small_chunks(stub, client):
    stub.script(Reply.tool_calls(("lookup", {"query": "photosynthesis", "depth": 2}), ("lookup", {"query": "chlorophyll"}),
                                 text="Let me check.", chunk=2))
    deltas, result = await run(client, request(stub, tools=(LOOKUP,)))
    assert "".join(deltas) == result.text == "Let me check."
    assert result.finish_reason is FinishReason.TOOL_CALLS
    assert [(c.id, c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("call_stub_0", "lookup", {"query": "photosynthesis", "depth": 2}),
        ("call_stub_1", "lookup", {"query": "chlorophyll"}),
    ]
    assert stub.requests[0]["tools"] == [{"type": "function", "function": LOOKUP.model_dump()}]


async def test_tool_results_go_back_in_openai_shape(stub, client):
    call = ToolCall(id="call_1", name="lookup", arguments='{"query": "cells"}')
    messages = HELLO + (ChatMessage(role="assistant", tool_calls=(call,)),
                        ChatMessage(role="tool", content="Cells are small.", tool_call_id="call_1", name="lookup"))
    _, result = await run(client, request(stub, messages, tools=(LOOKUP,)))
    assert result.text == "tool said: Cells are small."  # the stub's default rule
    sent = stub.requests[0]["messages"]
    assert sent[2]["tool_calls"] == [{"id": "call_1", "type": "function",
                                      "function": {"name": "lookup", "arguments": '{"query": "cells"}'}}]
    assert sent[3] == {"role": "tool", "content": "Cells are small.", "tool_call_id": "call_1", "name": "lookup"}


async def test_default_responder_calls_a_named_tool(stub, client):
    ask = (ChatMessage(role="user", content="please lookup mitosis"),)
    _, result = await run(client, request(stub, ask, tools=(LOOKUP,)))
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [("lookup", {"query": "please lookup mitosis"})]


async def test_usage_priced_by_the_settings(stub, client):
    stub.script(Reply.text("Fine.", usage={"prompt_tokens": 100, "completion_tokens": 20}))
    _, result = await run(client, request(stub, input_cost_per_token=0.01, output_cost_per_token=0.02))
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (100, 20)
    assert result.usage.cost == pytest.approx(1.4)


async def test_usage_priced_by_litellm_when_the_model_is_known(stub, client):
    litellm = load_litellm()
    stub.script(Reply.text("Fine.", usage={"prompt_tokens": 1000, "completion_tokens": 200}))
    _, result = await run(client, request(stub, model="openai/gpt-4o-mini"))
    prices = litellm.model_cost["gpt-4o-mini"]
    expected = 1000 * prices["input_cost_per_token"] + 200 * prices["output_cost_per_token"]
    assert result.usage.cost == pytest.approx(expected) and expected > 0


async def test_unknown_model_without_prices_costs_nothing(stub, client):
    stub.script(Reply.text("Fine.", usage={"prompt_tokens": 10, "completion_tokens": 2}))
    _, result = await run(client, request(stub))
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.cost) == (10, 2, 0.0)


async def test_length_finish_is_reported(stub, client):
    stub.script(Reply.truncated("The mitochondria is the power"))
    deltas, result = await run(client, request(stub))
    assert result.finish_reason is FinishReason.LENGTH and result.text == "The mitochondria is the power"


async def test_empty_output_is_an_empty_result(stub, client):
    stub.script(Reply.empty())
    deltas, result = await run(client, request(stub))
    assert deltas == [] and result.text == "" and result.finish_reason is FinishReason.STOP


async def test_raw_text_keeps_think_tags_for_the_filter(stub, client):
    stub.script(Reply.think("The learner wants a greeting.", "Hi! How can I help?", chunk=3))
    deltas, result = await run(client, request(stub))
    assert result.text == "<think>The learner wants a greeting.</think>Hi! How can I help?"
    output = OutputFilter()
    shown = "".join(output.feed(d) for d in deltas)
    assert output.finish() == ("Hi! How can I help?", "The learner wants a greeting.")
    assert shown == "Hi! How can I help?"


@pytest.mark.parametrize("rejects", [(), ("stream",)], ids=["streamed", "not-streamed"])
async def test_reasoning_in_its_own_field_comes_back_as_think_tags(client, rejects):
    async with ModelStub(rejects=rejects) as stub:
        stub.script(Reply.text("Photosynthesis makes sugar.", reasoning="Keep it short for a child.", chunk=5))
        deltas, result = await run(client, request(stub))
        assert stub.pending == 0 and len(deltas) == (1 if rejects else 12)
    assert "".join(deltas) == result.text == "<think>Keep it short for a child.</think>Photosynthesis makes sugar."
    output = OutputFilter()
    for delta in deltas:
        output.feed(delta)
    assert output.finish() == ("Photosynthesis makes sugar.", "Keep it short for a child.")


async def test_text_markup_tool_calls_arrive_as_text(stub, client):
    stub.script(Reply.markup_tool_call("lookup", {"query": "ions"}, before="One moment. ", chunk=5))
    deltas, result = await run(client, request(stub))
    assert result.tool_calls == () and "<tool_call>" in result.text
    output = OutputFilter()
    for delta in deltas:
        output.feed(delta)
    assert output.finish()[0] == "One moment. "
    assert [(c.name, json.loads(c.arguments)) for c in output.tool_calls] == [("lookup", {"query": "ions"})]


# --------------------------------------------------------------------------- retries and fallback


async def test_rate_limit_waits_retry_after_then_succeeds(stub, client, sleeps):
    stub.script(Reply.rate_limited(retry_after=3), Reply.text("after the wait"))
    _, result = await run(client, request(stub))
    assert result.text == "after the wait"
    assert sleeps == [3.0] and len(stub.requests) == 2


async def test_rate_limit_longer_than_the_bound_is_not_waited(stub, client, sleeps):
    stub.script(Reply.rate_limited(retry_after=600))
    error = await fails(client, request(stub))
    assert error.kind is ModelErrorKind.RATE_LIMITED and error.retry_after == 600 and error.transient
    assert sleeps == [] and len(stub.requests) == 1
    assert "openai/stub-model says 429" in str(error)


async def test_a_model_gets_one_retry_whatever_failed(stub, client, sleeps):
    stub.script(Reply.rate_limited(2), Reply.server_error(), Reply.text("never asked"))
    error = await fails(client, request(stub))
    assert error.kind is ModelErrorKind.TRANSIENT and sleeps == [2.0] and len(stub.requests) == 2


async def test_server_errors_retry_once_then_go_to_the_backup(stub, client, sleeps):
    stub.script(Reply.server_error(), Reply.server_error(502), Reply.text("backup here"))
    backup = settings(stub, model="openai/backup-model")
    _, result = await run(client, request(stub, backup=backup))
    assert result.text == "backup here" and result.model == "openai/backup-model"
    assert [r["model"] for r in stub.requests] == ["stub-model"] * 2 + ["backup-model"]
    assert sleeps == [pytest.approx(0.375)]  # equal jitter, draw 0.5, base 0.5 s


async def test_server_errors_without_backup_raise_transient(stub, client, sleeps):
    stub.script(*[Reply.server_error()] * 3)
    error = await fails(client, request(stub))
    assert error.kind is ModelErrorKind.TRANSIENT and error.status == 500
    assert len(stub.requests) == 2 and len(sleeps) == 1 and stub.pending == 1


async def test_a_slow_answer_is_a_timeout(stub, sleeps):
    client = LitellmClient(ModelQuirks(), retry=RetryPolicy(retries=0), sleep=sleeps)
    stub.script(Reply.timeout(seconds=10))
    req = ModelRequest(settings=settings(stub).model_copy(update={"timeout_s": 0.3}), messages=HELLO)
    error = await fails(client, req)
    assert error.kind is ModelErrorKind.TIMEOUT and error.transient and "timeout_s" in error.message


async def test_timeout_is_retried(stub, client, sleeps):
    stub.script(Reply.timeout(seconds=10), Reply.text("on time"))
    req = ModelRequest(settings=settings(stub).model_copy(update={"timeout_s": 0.3}), messages=HELLO)
    _, result = await run(client, req)
    assert result.text == "on time" and len(sleeps) == 1


async def test_nothing_is_retried_once_text_was_shown(stub, client, sleeps):
    stub.script(Reply.text("This answer breaks off half way", chunk=4, cut_after=3), Reply.text("never asked"))
    deltas = []
    with pytest.raises(ModelError) as caught:
        async for item in client.stream(request(stub, backup=settings(stub, model="openai/backup-model"))):
            deltas.append(item)
    assert caught.value.kind is ModelErrorKind.TRANSIENT
    assert [d.text for d in deltas] == ["This", " ans"]
    assert len(stub.requests) == 1 and sleeps == [] and stub.pending == 1


async def test_auth_error_is_not_retried_but_the_backup_is_asked(stub, client, sleeps):
    stub.script(Reply.unauthorized(), Reply.text("backup here"))
    _, result = await run(client, request(stub, backup=settings(stub, model="openai/backup-model")))
    assert result.text == "backup here" and result.model == "openai/backup-model"
    assert [r["model"] for r in stub.requests] == ["stub-model", "backup-model"] and sleeps == []


async def test_auth_error_without_backup_raises_at_once(stub, client, sleeps):
    stub.script(Reply.unauthorized(), Reply.text("never asked"))
    error = await fails(client, request(stub))
    assert error.kind is ModelErrorKind.AUTH and not error.transient and error.status == 401
    assert len(stub.requests) == 1 and sleeps == []


async def test_missing_key_is_an_auth_error(stub, client, sleeps, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    req = ModelRequest(settings=ModelSettings(model="openai/stub-model", api_base=stub.api_base), messages=HELLO)
    error = await fails(client, req)
    assert error.kind is ModelErrorKind.AUTH and sleeps == []


async def test_context_too_long_is_classified(stub, client, sleeps):
    stub.script(Reply.context_too_long())
    error = await fails(client, request(stub))
    assert error.kind is ModelErrorKind.CONTEXT_TOO_LONG and sleeps == []


async def test_other_bad_requests_are_bad_requests(stub, client, sleeps):
    stub.script(Reply.failure(400, "'messages' must contain the word 'json'", type="invalid_request_error",
                              param="messages"))
    error = await fails(client, request(stub))
    assert error.kind is ModelErrorKind.BAD_REQUEST and error.param == "messages" and sleeps == []


# --------------------------------------------------------------------------- deadlines


def quick(stub: ModelStub, model: str = "openai/stub-model", **extra) -> ModelSettings:
    """Settings with deadlines short enough for a test; hangs are bounded by the test's own timeout.

    0.5 s is only for a stub that never answers; where the stub does answer, the deadline it must
    meet is a few seconds, so a loaded machine does not miss it."""
    return settings(stub, model, **{"first_token_timeout_s": 0.5, "timeout_s": 5, **extra})


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_a_model_that_never_answers_times_out_retries_once_then_the_backup_twice(stub, client, sleeps):
    stub.script(*[Reply.hung()] * 4, Reply.text("never asked"))
    req = ModelRequest(settings=quick(stub, backup=quick(stub, "openai/backup-model")), messages=HELLO, partner="tutor")
    error = await fails(client, req)
    assert error.kind is ModelErrorKind.TIMEOUT and error.model == "openai/backup-model"
    assert "first_token_timeout_s" in error.message
    assert [r["model"] for r in stub.requests] == ["stub-model", "stub-model", "backup-model", "backup-model"]
    assert stub.pending == 1 and len(sleeps) == 2


async def test_a_first_token_then_silence_is_a_timeout_and_not_retried(stub, client, sleeps):
    stub.script(Reply.stalled("The answer begins and then", chunk=10, after=2), Reply.text("never asked"))
    deltas = []
    with pytest.raises(ModelError) as caught:
        async for item in client.stream(ModelRequest(settings=quick(stub, first_token_timeout_s=2,
                                                                    backup=quick(stub, "openai/backup-model")),
                                                     messages=HELLO)):
            deltas.append(item)
    assert caught.value.kind is ModelErrorKind.TIMEOUT and "stopped mid-way" in caught.value.message
    assert [d.text for d in deltas] == ["The answer"]
    assert len(stub.requests) == 1 and stub.pending == 1 and sleeps == []


async def test_a_steady_stream_may_take_longer_than_the_first_token_deadline(stub, client):
    stub.script(Reply.text("slow but steady", chunk=3, pause=0.5))  # 7 pieces, 0.5 s apart: over 3 s in all
    _, result = await run(client, ModelRequest(settings=quick(stub, first_token_timeout_s=2), messages=HELLO))
    assert result.text == "slow but steady"


async def test_a_stream_longer_than_the_whole_answer_deadline_is_cut(stub, client, sleeps):
    stub.script(Reply.text("x" * 40, chunk=1, pause=0.1), Reply.text("y" * 40, chunk=1, pause=0.1))
    with pytest.raises(ModelError) as caught:
        await run(client, ModelRequest(settings=quick(stub, timeout_s=1, first_token_timeout_s=5), messages=HELLO))
    assert caught.value.kind is ModelErrorKind.TIMEOUT and "not finished within timeout_s" in caught.value.message


async def test_a_closed_port_is_unreachable_and_named(client, sleeps):
    base = f"http://127.0.0.1:{closed_port()}/v1"
    req = ModelRequest(settings=ModelSettings(model="openai/stub-model", api_base=base, api_key=SecretStr("k")),
                       messages=HELLO)
    error = await fails(client, req)
    assert error.kind is ModelErrorKind.UNREACHABLE and error.transient and error.status is None
    assert error.message == f"nothing answers at {base}: connection refused"
    assert len(sleeps) == 1  # retried once


async def test_a_connection_that_never_opens_is_unreachable_after_the_connect_deadline(client, sleeps):
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)  # never accepted: once its queue is full, the kernel drops further connection attempts
    port = full.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        base = f"http://127.0.0.1:{port}/v1"
        req = ModelRequest(settings=ModelSettings(model="openai/stub-model", api_base=base, api_key=SecretStr("k"),
                                                  connect_timeout_s=0.3, first_token_timeout_s=30), messages=HELLO)
        error = await fails(client, req)
    finally:
        for sock in (*fillers, full):
            sock.close()
    assert error.kind is ModelErrorKind.UNREACHABLE and "connect_timeout_s" in error.message


# --------------------------------------------------------------------------- health


async def test_health_follows_failures_the_backup_and_recovery(stub, client):
    from brain.health import ModelState

    backup = settings(stub, model="openai/backup-model")
    stub.script(Reply.server_error(503), Reply.server_error(503), Reply.text("backup here"))
    await run(client, ModelRequest(settings=settings(stub, backup=backup), messages=HELLO, partner="tutor"))
    degraded = client.health.condition("tutor")
    assert degraded.state is ModelState.DEGRADED and degraded.model == "openai/stub-model"
    assert degraded.kind == "transient" and "503" in degraded.reason and "backup openai/backup-model answers" in degraded.reason
    assert degraded.failures == 2 and degraded.since is not None

    stub.script(Reply.server_error(503), Reply.server_error(503))
    await fails(client, ModelRequest(settings=settings(stub), messages=HELLO, partner="tutor"))
    failing = client.health.condition("tutor")
    assert failing.state is ModelState.FAILING and failing.since == degraded.since and failing.failures == 4

    stub.script(Reply.text("back again"))
    await run(client, ModelRequest(settings=settings(stub), messages=HELLO, partner="tutor"))
    assert client.health.condition("tutor").state is ModelState.OK
    assert client.health.condition("someone-else").state is ModelState.UNTRIED


# --------------------------------------------------------------------------- quirks


async def test_unsupported_streaming_retries_without_and_is_remembered(stub, client, sleeps):
    stub.script(Reply.unsupported("stream"), Reply.text("first answer"), Reply.text("second answer"))
    deltas, result = await run(client, request(stub))
    assert deltas == ["first answer"] and result.text == "first answer"
    assert not client.quirks.streaming("openai/stub-model")
    deltas, result = await run(client, request(stub))
    assert deltas == ["second answer"]
    assert [r.get("stream", False) for r in stub.requests] == [True, False, False]
    assert "stream_options" not in stub.requests[2] and sleeps == []
    assert result.usage.completion_tokens > 0


async def test_a_model_that_never_streams(client):
    async with ModelStub(rejects=("stream",)) as stub:
        _, result = await run(client, request(stub))
        assert result.text == "echo: hello"
        assert [r.get("stream", False) for r in stub.requests] == [True, False]


async def test_unsupported_stream_options_keeps_streaming_without_them(stub, client):
    stub.script(Reply.unsupported("stream_options"), Reply.text("still streamed", chunk=4))
    deltas, result = await run(client, request(stub))
    assert len(deltas) > 1 and result.text == "still streamed"
    assert client.quirks.has("openai/stub-model", Quirk.NO_STREAM_OPTIONS) and client.quirks.streaming("openai/stub-model")
    assert stub.requests[1]["stream"] is True and "stream_options" not in stub.requests[1]
    assert result.usage.completion_tokens > 0  # counted by litellm when the provider sends none


async def test_refusing_stream_without_streaming_is_a_bad_request(stub, sleeps):
    client = LitellmClient(ModelQuirks({"openai/stub-model": [Quirk.NO_STREAMING]}), sleep=sleeps)
    stub.script(Reply.unsupported("stream"))
    error = await fails(client, request(stub))
    assert error.kind is ModelErrorKind.BAD_REQUEST and len(stub.requests) == 1


async def test_unsupported_tools_raise_and_are_remembered(stub, client, sleeps):
    stub.script(Reply.unsupported("tools"))
    with pytest.raises(ToolsUnsupported) as caught:
        await run(client, request(stub, tools=(LOOKUP,)))
    assert caught.value.kind is ModelErrorKind.UNSUPPORTED_TOOLS and sleeps == []
    assert not client.native_tools("openai/stub-model") and not client.quirks.native_tools("openai/stub-model")
    with pytest.raises(ToolsUnsupported):  # known now: refused without asking the provider
        await run(client, request(stub, tools=(LOOKUP,)))
    assert len(stub.requests) == 1


async def test_history_goes_as_text_protocol_to_a_model_without_tools(stub):
    client = LitellmClient(ModelQuirks({"openai/stub-model": ["no_native_tools"]}))
    call = ToolCall(id="call_1", name="lookup", arguments='{"query": "cells"}')
    messages = HELLO + (ChatMessage(role="assistant", content="Checking.", tool_calls=(call,)),
                        ChatMessage(role="tool", content="Cells are small.", tool_call_id="call_1", name="lookup"))
    await run(client, request(stub, messages))
    sent = stub.requests[0]["messages"]
    assert sent[2] == {"role": "assistant",
                       "content": 'Checking.\n<tool_call>{"name": "lookup", "arguments": {"query": "cells"}}</tool_call>'}
    assert sent[3] == {"role": "user", "content": '<tool_result name="lookup">\nCells are small.\n</tool_result>'}


async def test_unsupported_images_are_remembered(stub, client):
    stub.script(Reply.failure(400, "Invalid content type. image_url is only supported by certain models.",
                              type="invalid_request_error", param="messages.[1].content.[1].type"))
    error = await fails(client, request(stub))
    assert error.kind is ModelErrorKind.UNSUPPORTED_IMAGES
    assert not client.quirks.images("openai/stub-model") and client.quirks.native_tools("openai/stub-model")


def test_quirks_are_saved_and_loaded(tmp_path):
    path = tmp_path / "state" / "model_quirks.json"
    quirks = ModelQuirks.load(path)
    assert quirks.to_json() == {}
    assert quirks.learn("ollama/gemma", Quirk.NO_NATIVE_TOOLS, "does not support tools")
    assert not quirks.learn("ollama/gemma", Quirk.NO_NATIVE_TOOLS)
    quirks.learn("openai/o1", Quirk.NO_STREAMING)
    assert json.loads(path.read_text()) == {"ollama/gemma": ["no_native_tools"], "openai/o1": ["no_streaming"]}
    again = ModelQuirks.load(path)
    assert not again.native_tools("ollama/gemma") and not again.streaming("openai/o1") and again.streaming("ollama/gemma")
    path.write_text("{not json")
    assert ModelQuirks.load(path).to_json() == {}


# --------------------------------------------------------------------------- boundaries


def test_errors_that_are_not_the_providers_are_not_classified():
    load_litellm()
    assert classify(ValueError("a bug"), "openai/x") is None


def test_provider_messages_without_a_param_are_recognised():
    litellm = load_litellm()
    cases = {
        "registry.ollama.ai/library/gemma:2b does not support tools": ModelErrorKind.UNSUPPORTED_TOOLS,
        "ollama does not support parameters: ['tools'], for model=gemma": ModelErrorKind.UNSUPPORTED_TOOLS,
        "Unsupported value: 'stream' does not support true with this model.": ModelErrorKind.UNSUPPORTED_STREAMING,
        "this model does not support image input": ModelErrorKind.UNSUPPORTED_IMAGES,
        "temperature must be below 2": ModelErrorKind.BAD_REQUEST,
    }
    for message, kind in cases.items():
        error = litellm.BadRequestError(message=message, model="x", llm_provider="openai")
        assert classify(error, "openai/x").kind is kind, message


def test_importing_the_brain_does_not_import_litellm():
    code = "import sys, brain.model, brain.markup; assert 'litellm' not in sys.modules, 'litellm imported eagerly'"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_litellm_is_loaded_offline_and_quiet():
    litellm = load_litellm()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True" and litellm.suppress_debug_info


# --------------------------------------------------------------------------- the stub as a process


async def test_stub_process_is_scripted_over_http():
    peer = ModelStubProcess.start(rejects=("tools",))
    try:
        async with httpx.AsyncClient(base_url=peer.url, trust_env=False) as http:
            assert (await http.get("/v1/models")).json()["data"][0]["id"] == "stub-model"
        assert peer.script(Reply.text("scripted!"))["queued"] == 1
        stub_settings = ModelSettings(model="openai/stub-model", api_base=peer.api_base, api_key=SecretStr("sk-test"))
        client = LitellmClient()
        _, result = await run(client, ModelRequest(settings=stub_settings, messages=HELLO))
        assert result.text == "scripted!"
        with pytest.raises(ToolsUnsupported):
            await run(client, ModelRequest(settings=stub_settings, messages=HELLO, tools=(LOOKUP,)))
        logged = peer.requests()
        assert [m["content"] for m in logged[0]["messages"]] == ["You are a tutor.", "hello"]
        assert "tools" in logged[1] and peer.script(reset=True) == {"queued": 0, "rejects": []}

        litellm = load_litellm()
        embedded = await litellm.aembedding(model="openai/stub-embed", input=["a", "b", "a"], api_base=peer.api_base,
                                            api_key="sk-test")
        vectors = [item["embedding"] for item in embedded.data]
        assert len(vectors[0]) == DIMENSIONS and vectors[0] == vectors[2] != vectors[1]
        assert sum(v * v for v in vectors[0]) == pytest.approx(1.0, abs=1e-4)
    finally:
        peer.stop()


def test_an_unreachable_address_is_named_without_its_credentials():
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed")
        except ConnectionRefusedError as refused:
            raise httpx.ConnectError("Cannot connect to host") from refused
    except httpx.ConnectError as raw:
        error = classify(raw, "ollama/llama3", api_base="http://teacher:hunter2@127.0.0.1:11434")
    assert error.kind is ModelErrorKind.UNREACHABLE
    assert error.message == "nothing answers at http://127.0.0.1:11434: connection refused"
