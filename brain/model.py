"""The model seam: one method that streams an answer, and its litellm implementation.

A :class:`ModelClient` turns a :class:`~brain.types.ModelRequest` into raw
:class:`~brain.types.TextDelta` pieces followed by exactly one
:class:`~brain.types.ModelResult`.  :class:`LitellmClient` is the real one; it
reaches any provider litellm supports.  "Raw" means think tags and text tool
markup are still in it (``brain.markup`` filters them); reasoning a provider
sends in its own ``reasoning_content`` field is written into the text as
``<think>…</think>`` so that one filter handles both.

litellm's exceptions are translated once, here, into :class:`ModelError` with
a :class:`ModelErrorKind`, most specific first::

    ModelError(kind)                 GatewayError
    ├── rate_limited                 429; carries retry_after when the provider said
    ├── unreachable                  nothing answers at the address: refused, no connection in time, no such host
    ├── timeout                      a deadline passed: no first token, a stall mid-answer, the whole answer
    ├── transient                    5xx, dropped connections
    ├── unsupported_streaming        the model refuses ``stream`` (or ``stream_options``)
    ├── unsupported_tools            ToolsUnsupported: switch to the text tool protocol
    ├── unsupported_images           drop the images and ask again
    ├── context_too_long             shorten the conversation
    ├── auth                         401/403: the key is wrong or revoked
    └── bad_request                  anything else the provider rejected

What a model cannot do is learned once and remembered per model name in
:class:`ModelQuirks` (saved as JSON when given a path): a model that refuses
streaming is asked without it from then on, one that refuses ``stream_options``
streams without usage chunks (litellm then counts the tokens itself), and one
that refuses tools or images is reported so the loop can stop sending them
(``native_tools(model)``; a request with tools to such a model fails at once,
and its earlier tool calls and results go out written in the text protocol).

Cost: the settings' per-token prices when set (the operator knows their
contract), else litellm's bundled price list, else 0.

Deadlines (``docs/adr/0013``): the connection must open within
``connect_timeout_s``; the first piece of the answer must come within
``first_token_timeout_s`` of asking, and no later piece may take longer than
that either; the whole answer must be done within ``timeout_s``.  A missed
deadline is a ``timeout`` error like any other.

Retries live here and only here, and they are bounded: each model in the
chain gets *one* retry (``RetryPolicy.retries``) after a rate limit (waiting
the provider's ``retry_after`` when it is short enough), an outage or a missed
deadline; then the request goes to ``settings.backup`` (for any failure but
the ones the caller adapts to: tools, images), which gets one retry too.  So a
dead model with a dead backup costs four attempts, then the caller answers
without a model.  Nothing is retried once text has reached the caller: the
learner has seen it (``docs/adr/0004``).

Every failed attempt and every answer is reported to :class:`brain.health.ModelHealth`
under ``request.partner``: that is what ``/status`` and the metrics show.

litellm is imported lazily, off the event loop, on the first request (or by
:func:`warm`, which ``serve`` runs in a worker thread once it listens): it takes
seconds to import and the CLI must start fast.  Before importing it we make it
offline-friendly (bundled cost map, no remote fetches) and quiet.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import re
import socket
import threading
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TypeVar

import httpx

from brain.health import ModelHealth
from brain.markup import text_protocol_messages
from brain.types import ChatMessage, FinishReason, ModelRequest, ModelResult, TextDelta, ToolCall, Usage
from gateway.core.config import ModelSettings
from gateway.core.errors import GatewayError

log = logging.getLogger(__name__)


class ModelClient(Protocol):
    def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResult]:
        """Yield the answer's raw text as it arrives, then exactly one ModelResult."""
        ...

    def native_tools(self, model: str) -> bool:
        """False once ``model`` is known to refuse ``tools``: then use the text tool protocol."""
        ...


# --------------------------------------------------------------------------- errors


class ModelErrorKind(str, Enum):
    RATE_LIMITED = "rate_limited"
    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    TRANSIENT = "transient"
    UNSUPPORTED_STREAMING = "unsupported_streaming"
    UNSUPPORTED_TOOLS = "unsupported_tools"
    UNSUPPORTED_IMAGES = "unsupported_images"
    CONTEXT_TOO_LONG = "context_too_long"
    AUTH = "auth"
    BAD_REQUEST = "bad_request"


class ModelError(GatewayError):
    """A model call failed; ``kind`` says how, the message names the model and the provider's status."""

    def __init__(self, kind: ModelErrorKind, message: str, retry_after: float | None = None, *,
                 model: str = "", status: int | None = None, param: str | None = None):
        self.kind, self.message, self.model, self.status, self.param = kind, message, model, status, param
        self.retry_after = None if retry_after is None else max(0.0, float(retry_after))
        said = f" says {status}" if status else ""
        super().__init__(f"{model or 'model'}{said}: {kind.value}: {message}")

    @property
    def transient(self) -> bool:
        """Worth one more try: the same request may well succeed in a moment."""
        return self.kind in _TRANSIENT

    @property
    def adapts(self) -> bool:
        """The caller changes the request and asks again (text tool protocol, no images): not a failure."""
        return self.kind in _ADAPTED


_TRANSIENT = frozenset({ModelErrorKind.RATE_LIMITED, ModelErrorKind.UNREACHABLE, ModelErrorKind.TIMEOUT,
                        ModelErrorKind.TRANSIENT})
_ADAPTED = frozenset({ModelErrorKind.UNSUPPORTED_STREAMING, ModelErrorKind.UNSUPPORTED_TOOLS,
                      ModelErrorKind.UNSUPPORTED_IMAGES})


class ToolsUnsupported(ModelError):
    """The model does not take native tools: ask again with the text tool protocol (``brain.markup``)."""

    def __init__(self, message: str, *, model: str = "", status: int | None = None, param: str | None = None):
        super().__init__(ModelErrorKind.UNSUPPORTED_TOOLS, message, model=model, status=status, param=param)


def model_error(kind: ModelErrorKind, message: str, retry_after: float | None = None, *,
                model: str = "", status: int | None = None, param: str | None = None) -> ModelError:
    if kind is ModelErrorKind.UNSUPPORTED_TOOLS:
        return ToolsUnsupported(message, model=model, status=status, param=param)
    return ModelError(kind, message, retry_after, model=model, status=status, param=param)


_TOOL_PARAMS = {"tools", "tool_choice", "functions", "function_call", "parallel_tool_calls"}
_STREAM_PARAMS = {"stream", "stream_options"}
_UNSUPPORTED = [  # (kind, pattern on the lower-cased message), for providers that name no ``param``
    (ModelErrorKind.UNSUPPORTED_STREAMING, r"unsupported (parameter|value): '?stream|'stream(_options)?'? (is not|does not)"
                                           r"|stream(ing)? (is )?not supported|does not support stream"),
    (ModelErrorKind.UNSUPPORTED_TOOLS, r"unsupported parameter: '?(tools|tool_choice|functions)|does not support "
                                       r"(tools|tool|function)|(tool|function)s?( calling| call| use)? (is |are )?not "
                                       r"supported|tool choice requires|parameters: \[[^\]]*'tools'"),
    (ModelErrorKind.UNSUPPORTED_IMAGES, r"does not support (image|vision)|image_url is only supported|image input"
                                        r"|(image|vision)s? (is |are )?not supported|unsupported parameter: '?image"),
]


_MISSING_KEY = re.compile(r"missing credentials|(no|missing|invalid|incorrect) api[ _]?key", re.IGNORECASE)


def _unsupported(param: str | None, text: str) -> ModelErrorKind | None:
    if param in _STREAM_PARAMS:
        return ModelErrorKind.UNSUPPORTED_STREAMING
    if param in _TOOL_PARAMS:
        return ModelErrorKind.UNSUPPORTED_TOOLS
    if param and "image" in param:
        return ModelErrorKind.UNSUPPORTED_IMAGES
    lowered = text.lower()
    return next((kind for kind, pattern in _UNSUPPORTED if re.search(pattern, lowered)), None)


def _retry_after(error: BaseException) -> float | None:
    """Seconds from ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms``, if the provider sent them."""
    headers = getattr(error, "litellm_response_headers", None) or getattr(getattr(error, "response", None), "headers", None)
    if not headers:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if email.utils.parsedate(value) else None
        return max(0.0, when.timestamp() - time.time()) if when else None


def _detail(error: BaseException, body: object) -> str:
    """The provider's own words, without litellm's "litellm.XError: XError: OpenAIException - " prefixes."""
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    text = str(error)
    if "Exception - " in text:
        text = text.rpartition("Exception - ")[2]
    return text.strip()[:500] or type(error).__name__


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _unreachable(error: BaseException) -> str | None:
    """Why nothing answers at the address, when the transport says it could not connect at all."""
    causes = list(_causes(error))
    if any(isinstance(c, httpx.ConnectTimeout) for c in causes):
        return "no connection within connect_timeout_s"
    if any(isinstance(c, socket.gaierror) for c in causes):
        return "the host name does not resolve"
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return "connection refused"
    if any(isinstance(c, httpx.ConnectError) for c in causes):
        return "cannot connect"
    return None


def _address(api_base: str | None) -> str:
    """The provider's address for a message, without any ``user:password@`` it may carry."""
    return re.sub(r"(?<=://)[^/@]*@", "", api_base) if api_base else "the provider's default address"


def classify(error: BaseException, model: str, *, api_base: str | None = None) -> ModelError | None:
    """Translate a litellm (or transport) exception into a ModelError; None for anything else (a bug)."""
    import litellm

    if isinstance(error, ModelError):
        return error
    status = getattr(error, "status_code", None)
    status = status if isinstance(status, int) else None
    body = getattr(error, "body", None)
    param = getattr(error, "param", None) or (body.get("param") if isinstance(body, dict) else None)
    detail = _detail(error, body)
    kind: ModelErrorKind | None
    if isinstance(error, litellm.ContextWindowExceededError):
        kind = ModelErrorKind.CONTEXT_TOO_LONG
    elif isinstance(error, litellm.RateLimitError) or status == 429:
        return model_error(ModelErrorKind.RATE_LIMITED, detail, _retry_after(error), model=model, status=status, param=param)
    elif (isinstance(error, (litellm.AuthenticationError, litellm.PermissionDeniedError)) or status in (401, 403)
          or _MISSING_KEY.search(detail)):  # litellm reports a missing key as a 500
        kind = ModelErrorKind.AUTH
    elif (why := _unreachable(error)) is not None:  # litellm reports a refused connection as a 500
        return model_error(ModelErrorKind.UNREACHABLE, f"nothing answers at {_address(api_base)}: {why}",
                           model=model, param=param)
    elif isinstance(error, (litellm.Timeout, asyncio.TimeoutError)):
        return model_error(ModelErrorKind.TIMEOUT, f"no answer in time ({detail})", model=model, param=param)
    elif (isinstance(error, (litellm.APIConnectionError, OSError))
          or (status or 0) >= 500):  # includes litellm's InternalServerError, ServiceUnavailable, BadGateway
        kind = ModelErrorKind.TRANSIENT
    elif isinstance(error, (litellm.BadRequestError, litellm.UnprocessableEntityError, litellm.NotFoundError)):
        kind = _unsupported(param, detail) or ModelErrorKind.BAD_REQUEST
    elif isinstance(error, litellm.APIError):
        kind = ModelErrorKind.TRANSIENT
    else:
        return None
    return model_error(kind, detail, model=model, status=status, param=param)


# --------------------------------------------------------------------------- quirks


class Quirk(str, Enum):
    NO_STREAMING = "no_streaming"
    NO_STREAM_OPTIONS = "no_stream_options"
    NO_NATIVE_TOOLS = "no_native_tools"
    NO_IMAGES = "no_images"


class ModelQuirks:
    """What each model (by litellm name) turned out not to support; saved to ``path`` when one is learned."""

    def __init__(self, known: Mapping[str, Iterable[Quirk | str]] | None = None, *, path: Path | None = None):
        self.path = path
        self._known: dict[str, set[Quirk]] = {model: {Quirk(q) for q in quirks} for model, quirks in (known or {}).items()}

    def has(self, model: str, quirk: Quirk) -> bool:
        return quirk in self._known.get(model, ())

    def streaming(self, model: str) -> bool:
        return not self.has(model, Quirk.NO_STREAMING)

    def stream_usage(self, model: str) -> bool:
        return not self.has(model, Quirk.NO_STREAM_OPTIONS)

    def native_tools(self, model: str) -> bool:
        return not self.has(model, Quirk.NO_NATIVE_TOOLS)

    def images(self, model: str) -> bool:
        return not self.has(model, Quirk.NO_IMAGES)

    def learn(self, model: str, quirk: Quirk, reason: str = "") -> bool:
        """Remember a quirk; True when it is new (and then saved, if this registry has a path)."""
        if self.has(model, quirk):
            return False
        self._known.setdefault(model, set()).add(quirk)
        log.warning("model=%s quirk=%s learned reason=%r", model, quirk.value, reason)
        if self.path is not None:
            self.save(self.path)
        return True

    def to_json(self) -> dict[str, list[str]]:
        return {model: sorted(q.value for q in quirks) for model, quirks in sorted(self._known.items()) if quirks}

    @classmethod
    def load(cls, path: Path) -> ModelQuirks:
        """The registry saved at ``path`` (empty when missing or unreadable: quirks are relearned)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls({model: [Quirk(q) for q in quirks] for model, quirks in data.items()}, path=path)
        except FileNotFoundError:
            return cls(path=path)
        except (OSError, ValueError, TypeError, AttributeError) as error:
            log.warning("path=%s model quirks unreadable, starting empty: %s", path, error)
            return cls(path=path)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".tmp")
        partial.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(partial, path)


_LEARNED = {
    ModelErrorKind.UNSUPPORTED_TOOLS: Quirk.NO_NATIVE_TOOLS,
    ModelErrorKind.UNSUPPORTED_IMAGES: Quirk.NO_IMAGES,
}


# --------------------------------------------------------------------------- litellm


_litellm: ModuleType | None = None
_importing = threading.Lock()
"""Held while litellm imports: a turn that comes during serve's warm-up waits for that import, not a second one."""


def load_litellm() -> ModuleType:
    """Import litellm once, offline-friendly and quiet (an operator's own env settings win)."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _importing:
        if _litellm is not None:
            return _litellm
        began = time.monotonic()
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled price list, no GitHub fetch
        os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")  # no remote catalogs, checks or tokenizers
        import litellm

        litellm.suppress_debug_info = True  # no "Provider List" / "Give Feedback" prints
        litellm.telemetry = False
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
            logging.getLogger(name).setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"litellm(\.|$)")
        _rehearse(litellm)
        _litellm = litellm
        log.info("model library loaded seconds=%.1f", time.monotonic() - began)
    return _litellm


def _rehearse(litellm: ModuleType) -> None:
    """Stream one answer from litellm's own mock (nothing leaves the process), so the modules and tokenizer a
    first call loads lazily (most of a second) are loaded with the import, not on a learner's first turn."""
    try:
        for _ in litellm.completion(model="openai/rehearsal", messages=[{"role": "user", "content": "hi"}],
                                    mock_response="ok", stream=True, stream_options={"include_usage": True}):
            pass
    except Exception as error:  # only a head start: the real call loads what it needs anyway
        log.debug("model library rehearsal failed: %s", error)


def warm() -> None:
    """Import litellm now, so that the first answer does not wait for it (``serve`` runs this in a worker thread
    once it answers).  A failure is logged, not raised: the first model call imports again and reports it."""
    try:
        load_litellm()
    except Exception as error:  # a broken install raises anything at import; the gateway still serves
        log.warning("model library warm-up failed, the first model call will try again: %s: %s",
                    type(error).__name__, error)


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 1
    """Tries after the first, per model in the chain, whatever the transient failure; then the backup."""
    max_rate_wait_s: float = 20.0
    """A longer ``retry_after`` is not waited for: the backup model (or the caller) takes over."""
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def backoff(self, attempt: int, draw: Callable[[], float]) -> float:
        """Equal jitter: half the exponential step, plus a random share of the other half."""
        step = min(self.max_backoff_s, self.backoff_s * 2**attempt)
        return step / 2 + draw() * step / 2


def _wire(message: ChatMessage) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                              for c in message.tool_calls]
    if message.tool_call_id is not None:
        wire["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        wire["name"] = message.name
    return wire


def _raw_text(message: Any) -> str:
    """The answer's text, with reasoning a provider returns in its own field put back in ``<think>`` tags.

    (DeepSeek, vLLM and Ollama send ``reasoning_content``; written as think tags, one filter handles both.)
    """
    content = getattr(message, "content", None) or ""
    reasoning = getattr(message, "reasoning_content", None)
    return f"<think>{reasoning}</think>{content}" if reasoning else content


def _chain(settings: ModelSettings | None) -> Iterable[ModelSettings]:
    while settings is not None:
        yield settings
        settings = settings.backup


T = TypeVar("T")


def _substantive(chunk: Any) -> bool:
    """A chunk that carries some of the answer (text, reasoning, a tool call) or ends it, not just a role."""
    if not chunk.choices:
        return getattr(chunk, "usage", None) is not None
    choice = chunk.choices[0]
    delta = choice.delta
    return bool(getattr(delta, "content", None) or getattr(delta, "reasoning_content", None)
                or getattr(delta, "tool_calls", None) or choice.finish_reason)


async def _before(deadline: float, awaitable: Awaitable[T], model: str, reason: str) -> T:
    """Await ``awaitable`` until the loop-clock ``deadline``; past it, a ``timeout`` ModelError saying ``reason``.

    The deadline covers this one await only, never the caller's code between two pieces (a timeout
    scope held across a ``yield`` would cancel whatever the caller happened to be awaiting)."""
    scope = asyncio.timeout_at(deadline)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if not scope.expired():
            raise
        raise ModelError(ModelErrorKind.TIMEOUT, reason, model=model) from None


class _Deadlines:
    """The three deadlines of one call, on the event loop's clock."""

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self.clock = asyncio.get_running_loop().time
        self.began = self.clock()
        self.answer_by = self.began + settings.timeout_s
        self.heard: float | None = None
        """When the latest piece of the answer arrived (None: nothing yet)."""

    def heard_now(self) -> None:
        self.heard = self.clock()

    def next_piece(self) -> tuple[float, str]:
        """When the next piece is due, and what to say if it does not come."""
        s = self.settings
        gap_by = (self.heard if self.heard is not None else self.began) + s.first_token_timeout_s
        if self.answer_by <= gap_by:
            return self.answer_by, f"the answer was not finished within timeout_s ({s.timeout_s:g} s)"
        if self.heard is None:
            return gap_by, f"no answer began within first_token_timeout_s ({s.first_token_timeout_s:g} s)"
        return gap_by, f"the answer stopped mid-way for first_token_timeout_s ({s.first_token_timeout_s:g} s)"

    def whole(self) -> tuple[float, str]:
        return self.answer_by, f"no answer within timeout_s ({self.settings.timeout_s:g} s)"


class LitellmClient:
    """A ModelClient for every provider litellm reaches; keeps deadlines, retries once, falls back, learns quirks."""

    def __init__(self, quirks: ModelQuirks | None = None, *, retry: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, draw: Callable[[], float] = random.random,
                 health: ModelHealth | None = None):
        self.quirks = quirks if quirks is not None else ModelQuirks()
        self.retry, self.sleep, self.draw = retry, sleep, draw
        self.health = health if health is not None else ModelHealth()

    def native_tools(self, model: str) -> bool:
        return self.quirks.native_tools(model)

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResult]:
        litellm = _litellm if _litellm is not None else await asyncio.to_thread(load_litellm)
        chain = list(_chain(request.settings))
        for number, settings in enumerate(chain):
            started = False
            try:
                async for piece in self._retrying(litellm, settings, request):
                    if isinstance(piece, ModelResult):
                        self.health.answered(request.partner, settings.model, chain[0].model)
                    started = True
                    yield piece
                return
            except ModelError as error:
                if started or error.adapts or number == len(chain) - 1:
                    raise
                log.warning("model=%s failed (%s), falling back to backup=%s",
                            settings.model, error, chain[number + 1].model)

    async def _retrying(
        self, litellm: ModuleType, settings: ModelSettings, request: ModelRequest
    ) -> AsyncIterator[TextDelta | ModelResult]:
        retried = 0
        while True:
            started = False
            try:
                async for piece in self._call(litellm, settings, request):
                    started = True
                    yield piece
                return
            except ModelError as error:
                if not error.adapts:
                    said = f"{settings.model} says {error.status}: " if error.status else ""
                    self.health.failed(request.partner, settings.model, error.kind.value, said + error.message)
                if started:
                    raise
                pause = self._pause(error, retried)
                if pause is None:
                    raise
                if not error.adapts:
                    retried += 1
                log.info("model=%s retrying in %.2f s after %s", settings.model, pause, error)
                if pause > 0:
                    await self.sleep(pause)

    def _pause(self, error: ModelError, retried: int) -> float | None:
        """How long to wait before trying again, or None to stop trying this model."""
        if error.kind is ModelErrorKind.UNSUPPORTED_STREAMING:
            return 0.0  # a quirk was learned; the next try asks differently (bounded: each quirk is learned once)
        if not error.transient or retried >= self.retry.retries:
            return None
        if error.kind is ModelErrorKind.RATE_LIMITED:
            wait = error.retry_after if error.retry_after is not None else self.retry.backoff(retried, self.draw)
            return wait if wait <= self.retry.max_rate_wait_s else None
        return self.retry.backoff(retried, self.draw)

    def _arguments(self, settings: ModelSettings, request: ModelRequest) -> dict[str, Any]:
        messages = request.messages
        if not self.quirks.native_tools(settings.model):
            messages = text_protocol_messages(messages)  # earlier native calls and results, as markup
        arguments: dict[str, Any] = {
            "model": settings.model,
            "messages": [_wire(m) for m in messages],
            # the transport's own bounds: the connect deadline, and the whole answer as a backstop to ours
            "timeout": httpx.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
            "max_retries": 0,  # retries are ours (the SDK underneath would retry too)
        }
        if settings.api_base:
            arguments["api_base"] = settings.api_base
        if settings.api_key is not None:
            arguments["api_key"] = settings.api_key.get_secret_value()
        if settings.temperature is not None:
            arguments["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            arguments["max_tokens"] = settings.max_tokens
        if request.tools:
            arguments["tools"] = [{"type": "function", "function": spec.model_dump()} for spec in request.tools]
        return arguments

    async def _call(
        self, litellm: ModuleType, settings: ModelSettings, request: ModelRequest
    ) -> AsyncIterator[TextDelta | ModelResult]:
        """One request to one model, within its deadlines: yields its text, then its result; failures come out as ModelError."""
        model = settings.model
        if request.tools and not self.quirks.native_tools(model):
            raise ToolsUnsupported("known not to take native tools; use the text tool protocol", model=model)
        arguments = self._arguments(settings, request)
        streamed = self.quirks.streaming(model)
        deadlines = _Deadlines(settings)
        try:
            if streamed:
                if self.quirks.stream_usage(model):
                    arguments["stream_options"] = {"include_usage": True}
                chunks = []
                due, why = deadlines.next_piece()
                opened = await _before(due, litellm.acompletion(**arguments, stream=True), model, why)
                # ``async with``: the connection is closed even when the caller stops listening half way
                async with opened as stream:
                    pieces = stream.__aiter__()
                    thinking = False
                    while True:
                        due, why = deadlines.next_piece()
                        try:
                            chunk = await _before(due, pieces.__anext__(), model, why)
                        except StopAsyncIteration:
                            break
                        chunks.append(chunk)
                        if _substantive(chunk):
                            deadlines.heard_now()
                        delta = chunk.choices[0].delta if chunk.choices else None
                        reasoning, text = getattr(delta, "reasoning_content", None), getattr(delta, "content", None)
                        piece = ("" if thinking or not reasoning else "<think>") + (reasoning or "")
                        thinking = thinking or bool(reasoning)
                        if text and thinking:
                            piece, thinking = piece + "</think>", False
                        if piece + (text or ""):
                            yield TextDelta(text=piece + (text or ""))
                    if thinking:
                        yield TextDelta(text="</think>")
                response = litellm.stream_chunk_builder(chunks, messages=arguments["messages"])
            else:
                due, why = deadlines.whole()
                response = await _before(due, litellm.acompletion(**arguments), model, why)
                text = _raw_text(response.choices[0].message) if response.choices else ""
                if text:
                    yield TextDelta(text=text)
        except Exception as raw:
            error = classify(raw, model, api_base=settings.api_base)
            if error is None:
                raise
            raise self._learn(error, streamed=streamed, usage_asked="stream_options" in arguments) from raw
        yield self._result(litellm, settings, response)

    def _learn(self, error: ModelError, *, streamed: bool, usage_asked: bool) -> ModelError:
        """Remember what the error shows the model cannot do; returns the error to raise."""
        model, reason = error.model, error.message
        if error.kind is ModelErrorKind.UNSUPPORTED_STREAMING:
            options_only = error.param == "stream_options" or (error.param is None and "stream_options" in reason)
            if options_only and usage_asked:
                self.quirks.learn(model, Quirk.NO_STREAM_OPTIONS, reason)
            elif streamed:
                self.quirks.learn(model, Quirk.NO_STREAMING, reason)
            else:  # refused although we did not stream: retrying would not help
                return ModelError(ModelErrorKind.BAD_REQUEST, reason, model=model, status=error.status, param=error.param)
        elif error.kind in _LEARNED:
            self.quirks.learn(model, _LEARNED[error.kind], reason)
        return error

    def _result(self, litellm: ModuleType, settings: ModelSettings, response: Any) -> ModelResult:
        choice = response.choices[0] if response is not None and response.choices else None
        message = choice.message if choice is not None else None
        calls = tuple(
            ToolCall(id=c.id or f"call_{number}", name=c.function.name or "", arguments=c.function.arguments or "{}")
            for number, c in enumerate((message.tool_calls if message is not None else None) or ())
        )
        reason = (choice.finish_reason if choice is not None else None) or "stop"
        finish = (FinishReason.TOOL_CALLS if calls or reason in ("tool_calls", "function_call")
                  else FinishReason.LENGTH if reason == "length" else FinishReason.STOP)
        return ModelResult(
            text=_raw_text(message),
            tool_calls=calls,
            finish_reason=finish,
            usage=self._usage(litellm, settings, response),
            model=settings.model,
        )

    def _usage(self, litellm: ModuleType, settings: ModelSettings, response: Any) -> Usage:
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = self._cost(litellm, settings, response, prompt, completion)
        return Usage(prompt_tokens=prompt, completion_tokens=completion, cost=cost)

    @staticmethod
    def _cost(litellm: ModuleType, settings: ModelSettings, response: Any, prompt: int, completion: int) -> float:
        """The operator's per-token prices when set; else litellm's price list; else 0 (an unknown model)."""
        if settings.input_cost_per_token is not None or settings.output_cost_per_token is not None:
            return prompt * (settings.input_cost_per_token or 0.0) + completion * (settings.output_cost_per_token or 0.0)
        if response is None:
            return 0.0
        for model in (None, settings.model):  # the model the provider names first, then the configured one
            try:
                return float(litellm.completion_cost(completion_response=response, model=model) or 0.0)
            except Exception:  # litellm raises many kinds for "not in the price list"
                continue
        return 0.0
