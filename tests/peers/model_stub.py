"""An OpenAI-compatible model server for tests: scripted replies, recorded requests.

litellm (and any OpenAI client) reaches it over HTTP on 127.0.0.1, so the real
request building, streaming and error mapping run in every model test.  Use it
in-process, on the test's own event loop::

    async with ModelStub() as stub:
        stub.script(Reply.text("Hello there", chunk=3), Reply.rate_limited(retry_after=2))
        ...  # point the client at stub.api_base ("http://127.0.0.1:PORT/v1")
        assert stub.requests[0]["stream"] is True

or as a process, for end-to-end tests of a real ``partners serve``
(:class:`ModelStubProcess` starts one and scripts it)::

    python -m tests.peers.model_stub --port 0 [--reject tools]

which prints ``model stub listening on http://127.0.0.1:PORT`` once bound and is
scripted over HTTP: ``POST /_stub/script {"replies": [Reply.to_json(), ...],
"rejects": [...], "reset": bool}`` and ``GET /_stub/requests``.

API: ``GET /v1/models``; ``POST /v1/chat/completions`` (JSON, or server-sent
``chat.completion.chunk`` events ending in ``data: [DONE]`` when ``stream`` is
set, with a usage chunk when ``stream_options.include_usage`` is set);
``POST /v1/embeddings`` (deterministic 384-dimension hash vectors, as floats or
base64).

Faults a provider has: :meth:`Reply.hung` takes the request and never answers,
:meth:`Reply.stalled` streams a first piece and then falls silent (both hold the
connection open until the stub stops); a closed port, for a model that is
down, needs no stub at all.

Each chat request takes the next scripted :class:`Reply` from the queue; when
the queue is empty :func:`default_reply` answers by rule.  Every request body is
recorded, in order, before it is answered.  ``rejects`` names request
parameters the "model" never accepts (``tools``, ``stream``): any request that
sends one gets OpenAI's 400 ``unsupported_parameter`` without consuming a reply.
With ``api_key`` set (``--api-key``), a request whose ``Authorization: Bearer``
is not that key gets OpenAI's 401 ``invalid_api_key``, as a real provider does.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tests.peers import stop_process
from tests.waits import HTTP_S

ROOT = Path(__file__).resolve().parents[2]
DIMENSIONS = 384
MODEL_ID = "stub-model"

# --------------------------------------------------------------------------- scripted replies


@dataclass(frozen=True)
class Reply:
    """One scripted answer to one chat request; build it with the class methods."""

    kind: Literal["text", "tool_calls", "error"] = "text"
    content: str = ""
    calls: tuple[dict, ...] = ()
    """Native tool calls: ``{"id", "name", "arguments"}`` with arguments as JSON text."""
    finish_reason: str | None = None
    chunk: int = 8
    """Characters per streamed delta, for text and for tool-call arguments alike."""
    pause: float = 0.0
    """Seconds between streamed chunks."""
    delay: float = 0.0
    """Seconds before answering at all: longer than the client's timeout makes a timeout."""
    status: int = 200
    error: dict | None = None
    retry_after: float | None = None
    usage: dict | None = None
    """``prompt_tokens`` / ``completion_tokens`` to report instead of the stub's own count."""
    reasoning: str = ""
    """Reasoning sent in its own ``reasoning_content`` field, before the text (as DeepSeek and vLLM do)."""
    cut_after: int | None = None
    """Drop the connection after this many streamed chunks (a provider dying mid-answer)."""
    hang: bool = False
    """Take the request and never answer it, holding the connection open (a provider that is stuck)."""
    stall_after: int | None = None
    """Fall silent after this many streamed chunks, holding the connection open (a provider stuck mid-answer)."""
    gated: bool = False
    """Answer only once :meth:`ModelStub.open_gate` was called: a turn held mid-call for as long as a test needs."""

    @classmethod
    def text(cls, text: str, **options: Any) -> Reply:
        return cls(kind="text", content=text, **options)

    @classmethod
    def truncated(cls, text: str, **options: Any) -> Reply:
        """Output cut off by the token limit: ``finish_reason: length``."""
        return cls(kind="text", content=text, finish_reason="length", **options)

    @classmethod
    def empty(cls, **options: Any) -> Reply:
        return cls(kind="text", content="", **options)

    @classmethod
    def think(cls, reasoning: str, answer: str, **options: Any) -> Reply:
        return cls(kind="text", content=f"<think>{reasoning}</think>{answer}", **options)

    @classmethod
    def markup_tool_call(cls, name: str, arguments: dict, *, before: str = "", after: str = "", **options: Any) -> Reply:
        """A tool call written as text, the way models without native tool calling do it."""
        body = json.dumps({"name": name, "arguments": arguments})
        return cls(kind="text", content=f"{before}<tool_call>{body}</tool_call>{after}", **options)

    @classmethod
    def tool_calls(cls, *calls: tuple[str, dict] | dict, text: str = "", **options: Any) -> Reply:
        """Native ``tool_calls``: each call as ``(name, arguments)`` or ``{"name", "arguments", "id"?}``."""
        built = []
        for number, call in enumerate(calls):
            if isinstance(call, tuple):
                name, arguments, call_id = call[0], call[1], None
            else:
                name, arguments, call_id = call["name"], call.get("arguments", {}), call.get("id")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            built.append({"id": call_id or f"call_stub_{number}", "name": name, "arguments": arguments})
        return cls(kind="tool_calls", content=text, calls=tuple(built), finish_reason="tool_calls", **options)

    @classmethod
    def failure(cls, status: int, message: str, *, type: str = "api_error", param: str | None = None,
                code: str | None = None, retry_after: float | None = None, delay: float = 0.0) -> Reply:
        """An error answer with OpenAI's body: ``{"error": {message, type, param, code}}``."""
        body = {"error": {"message": message, "type": type, "param": param, "code": code}}
        return cls(kind="error", status=status, error=body, retry_after=retry_after, delay=delay)

    @classmethod
    def rate_limited(cls, retry_after: float = 1.0) -> Reply:
        return cls.failure(429, "Rate limit reached for requests", type="requests", code="rate_limit_exceeded",
                           retry_after=retry_after)

    @classmethod
    def server_error(cls, status: int = 500) -> Reply:
        return cls.failure(status, "The server had an error while processing your request.", type="server_error")

    @classmethod
    def unauthorized(cls) -> Reply:
        return cls.failure(401, "Incorrect API key provided: sk-test.", type="invalid_request_error",
                           code="invalid_api_key")

    @classmethod
    def unsupported(cls, param: str) -> Reply:
        """OpenAI's 400 for a parameter this model does not take (``tools``, ``stream``, ``stream_options``)."""
        return cls.failure(400, unsupported_message(param), type="invalid_request_error", param=param,
                           code="unsupported_parameter")

    @classmethod
    def context_too_long(cls) -> Reply:
        return cls.failure(400, "This model's maximum context length is 8192 tokens. However, your messages "
                           "resulted in 9000 tokens. Please reduce the length of the messages.",
                           type="invalid_request_error", param="messages", code="context_length_exceeded")

    @classmethod
    def hung(cls) -> Reply:
        """Accept the request and never send a byte back (until the stub stops)."""
        return cls(kind="text", content="never sent", hang=True)

    @classmethod
    def stalled(cls, text: str, *, after: int = 2, **options: Any) -> Reply:
        """Stream the role and the first ``after - 1`` pieces of ``text``, then fall silent for good."""
        return cls(kind="text", content=text, stall_after=after, **options)

    @classmethod
    def timeout(cls, seconds: float = 30.0, text: str = "too late") -> Reply:
        """Answer only after ``seconds``: longer than the client's timeout, so the client gives up first."""
        return cls(kind="text", content=text, delay=seconds)

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict) -> Reply:
        return cls(**{**data, "calls": tuple(data.get("calls", ()))})


def unsupported_message(param: str) -> str:
    return f"Unsupported parameter: '{param}' is not supported with this model."


def _last(messages: list[dict], role: str) -> dict | None:
    return next((m for m in reversed(messages) if m.get("role") == role), None)


def _content_text(message: dict | None) -> str:
    content = (message or {}).get("content") or ""
    if isinstance(content, list):  # content parts
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _example_arguments(schema: dict, text: str) -> dict:
    samples = {"string": text, "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}
    properties = schema.get("properties", {})
    return {name: samples.get(properties.get(name, {}).get("type"), text) for name in schema.get("required", [])}


def default_reply(body: dict) -> Reply:
    """The rule-based answer when nothing is scripted.

    - the last message is a tool result: answer ``tool said: <result>``;
    - tools were sent and the last user message names one: call it, with each
      required argument filled in (strings get the user's text);
    - otherwise echo the last user message: ``echo: <text>``.
    """
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        return Reply.text(f"tool said: {_content_text(messages[-1])}")
    said = _content_text(_last(messages, "user"))
    for tool in body.get("tools") or []:
        function = tool.get("function", {})
        if function.get("name") and re.search(rf"\b{re.escape(function['name'])}\b", said):
            return Reply.tool_calls((function["name"], _example_arguments(function.get("parameters") or {}, said)))
    return Reply.text(f"echo: {said}")


# --------------------------------------------------------------------------- wire format


def _count_tokens(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


def _usage(body: dict, reply: Reply) -> dict:
    if reply.usage:
        prompt, completion = reply.usage.get("prompt_tokens", 0), reply.usage.get("completion_tokens", 0)
    else:
        prompt = sum(_count_tokens(_content_text(m)) for m in body.get("messages") or []) or 1
        calls = sum(_count_tokens(c["name"] + c["arguments"]) for c in reply.calls)
        completion = _count_tokens(reply.reasoning + " " + reply.content) + calls
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _pieces(text: str, size: int) -> Iterator[str]:
    size = max(1, size)
    for start in range(0, len(text), size):
        yield text[start : start + size]


def _finish_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.calls else "stop")


def completion_body(body: dict, reply: Reply, number: int) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or (None if reply.calls else "")}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in reply.calls
        ]
    return {
        "id": f"chatcmpl-stub-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", MODEL_ID),
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply)}],
        "usage": _usage(body, reply),
    }


def completion_chunks(body: dict, reply: Reply, number: int) -> Iterator[dict]:
    """The chunks of a streamed answer: role, text pieces, tool-call pieces, finish, usage."""
    envelope = {"id": f"chatcmpl-stub-{number}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body.get("model", MODEL_ID)}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.reasoning, reply.chunk):
        yield chunk({"reasoning_content": piece})
    for piece in _pieces(reply.content, reply.chunk):
        yield chunk({"content": piece})
    for index, call in enumerate(reply.calls):
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": {"name": call["name"], "arguments": ""}}]})
        for piece in _pieces(call["arguments"], reply.chunk):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(reply))
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**envelope, "choices": [], "usage": _usage(body, reply)}


def embedding(text: str) -> list[float]:
    """A deterministic unit vector of :data:`DIMENSIONS` floats from the text's hash."""
    raw = hashlib.shake_256(text.encode("utf-8")).digest(DIMENSIONS * 2)
    values = [v / 32767.5 - 1.0 for v in struct.unpack(f"<{DIMENSIONS}H", raw)]
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    return [v / norm for v in values]


# --------------------------------------------------------------------------- the server


@dataclass
class StubState:
    queue: deque[Reply] = field(default_factory=deque)
    requests: list[dict] = field(default_factory=list)
    rejects: set[str] = field(default_factory=set)
    responder: Callable[[dict], Reply] = default_reply
    api_key: str | None = None
    """When set, only requests bearing this key are answered; the rest get 401."""
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)

    async def sleep(self, seconds: float) -> None:
        """Sleep, but wake at once when the server stops (so a "timeout" reply never holds up shutdown)."""
        if seconds > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), seconds)

    async def hold(self) -> None:
        """Wait until the server stops: a hung or stalled reply."""
        await self.stopping.wait()


class _Unfinished:
    """A streamed answer whose end never comes: the server drops the connection instead."""

    def __init__(self, events: AsyncIterator[str]):
        self.events = events

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        async for event in self.events:
            await send({"type": "http.response.body", "body": event.encode(), "more_body": True})


def _refused(state: StubState, request: Request) -> JSONResponse | None:
    """OpenAI's 401 for a request without the stub's key (None when the key is right or none is required)."""
    if state.api_key is None or request.headers.get("authorization", "") == f"Bearer {state.api_key}":
        return None
    reply = Reply.unauthorized()
    return JSONResponse(reply.error, status_code=reply.status)


def build_app(state: StubState) -> Starlette:
    async def models(request: Request) -> JSONResponse:
        if (refused := _refused(state, request)) is not None:
            return refused
        model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "stub"}
        return JSONResponse({"object": "list", "data": [model]})

    async def chat(request: Request) -> JSONResponse | StreamingResponse:
        if (refused := _refused(state, request)) is not None:
            return refused
        body = await request.json()
        state.requests.append(body)
        number = len(state.requests)
        rejected = next((p for p in sorted(state.rejects) if p in body), None)
        reply = Reply.unsupported(rejected) if rejected else state.queue.popleft() if state.queue else state.responder(body)
        await state.sleep(reply.delay)
        if reply.gated:
            gate = asyncio.create_task(state.gate.wait())
            stop = asyncio.create_task(state.stopping.wait())
            await asyncio.wait({gate, stop}, return_when=asyncio.FIRST_COMPLETED)
            gate.cancel()
            stop.cancel()
        if reply.hang:
            await state.hold()
            return JSONResponse({"error": {"message": "the stub is stopping"}}, status_code=503)
        if reply.kind == "error":
            headers = {"Retry-After": f"{reply.retry_after:g}"} if reply.retry_after is not None else None
            return JSONResponse(reply.error, status_code=reply.status, headers=headers)
        if not body.get("stream"):
            return JSONResponse(completion_body(body, reply, number))

        async def events():
            for sent, piece in enumerate(completion_chunks(body, reply, number)):
                if sent == reply.cut_after:
                    return
                if sent == reply.stall_after:
                    await state.hold()
                    return
                yield f"data: {json.dumps(piece)}\n\n"
                await state.sleep(reply.pause)
            yield "data: [DONE]\n\n"

        if reply.cut_after is not None:
            return _Unfinished(events())
        return StreamingResponse(events(), media_type="text/event-stream")

    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        data = []
        for index, text in enumerate(texts):
            vector: Any = embedding(str(text))
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(struct.pack(f"<{DIMENSIONS}f", *vector)).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": vector})
        tokens = sum(_count_tokens(str(t)) for t in texts)
        return JSONResponse({"object": "list", "data": data, "model": body.get("model", MODEL_ID),
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    async def script(request: Request) -> JSONResponse:
        body = await request.json()
        if isinstance(body, list):
            body = {"replies": body}
        if body.get("reset"):
            state.queue.clear()
            state.requests.clear()
            state.rejects.clear()
        if "rejects" in body:
            state.rejects = set(body["rejects"])
        state.queue.extend(Reply.from_json(r) for r in body.get("replies", []))
        return JSONResponse({"queued": len(state.queue), "rejects": sorted(state.rejects)})

    async def requests(_: Request) -> JSONResponse:
        return JSONResponse({"requests": state.requests})

    return Starlette(routes=[
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/_stub/script", script, methods=["POST"]),
        Route("/_stub/requests", requests, methods=["GET"]),
    ])


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


class ModelStub:
    """The stub served by uvicorn on the current event loop, on a free loopback port."""

    def __init__(self, *, rejects: tuple[str, ...] = (), responder: Callable[[dict], Reply] = default_reply,
                 api_key: str | None = None):
        self.state = StubState(rejects=set(rejects), responder=responder, api_key=api_key)
        self.port = 0
        self._server: Any = None
        self._task: asyncio.Task | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return f"{self.url}/v1"

    @property
    def requests(self) -> list[dict]:
        """Every chat request body received, oldest first."""
        return self.state.requests

    @property
    def rejects(self) -> set[str]:
        return self.state.rejects

    def script(self, *replies: Reply) -> None:
        """Queue replies; each chat request takes the next one."""
        self.state.queue.extend(replies)

    def open_gate(self) -> None:
        """Let every ``gated`` reply, waiting or still to come, answer."""
        self.state.gate.set()

    @property
    def pending(self) -> int:
        """Scripted replies not yet taken."""
        return len(self.state.queue)

    async def start(self) -> ModelStub:
        import uvicorn

        sock = _bind("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(build_app(self.state), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise RuntimeError("model stub stopped before it started")
            await asyncio.sleep(0.005)
        return self

    async def stop(self) -> None:
        if self._task is None:
            return
        self.state.stopping.set()
        self._server.should_exit = True
        await self._task
        self._task = None

    async def __aenter__(self) -> ModelStub:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


class ModelStubProcess:
    """The stub as its own process, for end-to-end tests of a real ``partners serve``; stopped by its pid."""

    def __init__(self, process: subprocess.Popen, url: str):
        self.process, self.url = process, url
        self.api_base = f"{url}/v1"

    @classmethod
    def start(cls, *, rejects: tuple[str, ...] = (), api_key: str | None = None) -> ModelStubProcess:
        args = [sys.executable, "-m", "tests.peers.model_stub", "--port", "0"]
        for param in rejects:
            args += ["--reject", param]
        if api_key is not None:
            args += ["--api-key", api_key]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE)
        line = process.stdout.readline().decode()  # type: ignore[union-attr]
        if "listening on " not in line:
            process.kill()
            process.wait()
            raise RuntimeError(f"model stub did not start: {line!r}")
        return cls(process, line.split("listening on ", 1)[1].strip())

    def _control(self, method: str, path: str, body: Any = None) -> Any:
        import httpx

        response = httpx.request(method, self.url + path, json=body, timeout=HTTP_S, trust_env=False)
        response.raise_for_status()
        return response.json()

    def script(self, *replies: Reply, rejects: tuple[str, ...] | None = None, reset: bool = False) -> dict:
        body: dict[str, Any] = {"replies": [r.to_json() for r in replies], "reset": reset}
        if rejects is not None:
            body["rejects"] = list(rejects)
        return self._control("POST", "/_stub/script", body)

    def requests(self) -> list[dict]:
        return self._control("GET", "/_stub/requests")["requests"]

    def stop(self) -> None:
        stop_process(self.process)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An OpenAI-compatible model stub for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--reject", action="append", default=[], help="a request parameter to refuse (repeatable)")
    parser.add_argument("--api-key", help="answer only requests bearing this key; the rest get 401")
    options = parser.parse_args(argv)

    import uvicorn

    state = StubState(rejects=set(options.reject), api_key=options.api_key)
    sock = _bind(options.host, options.port)
    sock.listen(128)  # before saying so: connections wait in the backlog until uvicorn has started
    port = sock.getsockname()[1]
    config = uvicorn.Config(build_app(state), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    print(f"model stub listening on http://{options.host}:{port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
