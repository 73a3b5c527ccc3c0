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
    ├── transient                    5xx, timeouts, dropped connections
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

Retries live here and only here: a rate limit waits the provider's
``retry_after`` (when it is short enough), a transient failure retries with
jittered backoff, and when those run out the request goes to
``settings.backup``.  Nothing is retried once text has reached the caller.

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
import threading
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from brain.markup import text_protocol_messages
from brain.types import ChatMessage, FinishReason, ModelRequest, ModelResult, ModelSettings, TextDelta, ToolCall, Usage
from gateway.errors import GatewayError

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
        return self.kind in (ModelErrorKind.RATE_LIMITED, ModelErrorKind.TRANSIENT)


class ToolsUnsupported(ModelError):
    """The model does not take native tools: ask again with the text tool protocol (``brain.markup``)."""

    def __init__(self, message: str, *, model: str = "", status: int | None = None, param: str | None = None):
        super().__init__(ModelErrorKind.UNSUPPORTED_TOOLS, message, model=model, status=status, param=param)


def model_error(kind: ModelErrorKind, message: str, retry_after: float | None = None, **where: Any) -> ModelError:
    if kind is ModelErrorKind.UNSUPPORTED_TOOLS:
        return ToolsUnsupported(message, **where)
    return ModelError(kind, message, retry_after, **where)


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


def classify(error: BaseException, model: str) -> ModelError | None:
    """Translate a litellm (or transport) exception into a ModelError; None for anything else (a bug)."""
    import litellm

    if isinstance(error, ModelError):
        return error
    status = getattr(error, "status_code", None)
    status = status if isinstance(status, int) else None
    body = getattr(error, "body", None)
    param = getattr(error, "param", None) or (body.get("param") if isinstance(body, dict) else None)
    detail = _detail(error, body)
    where = {"model": model, "status": status, "param": param}
    kind: ModelErrorKind | None
    if isinstance(error, litellm.ContextWindowExceededError):
        kind = ModelErrorKind.CONTEXT_TOO_LONG
    elif isinstance(error, litellm.RateLimitError) or status == 429:
        return model_error(ModelErrorKind.RATE_LIMITED, detail, _retry_after(error), **where)
    elif (isinstance(error, (litellm.AuthenticationError, litellm.PermissionDeniedError)) or status in (401, 403)
          or _MISSING_KEY.search(detail)):  # litellm reports a missing key as a 500
        kind = ModelErrorKind.AUTH
    elif (isinstance(error, (litellm.Timeout, litellm.APIConnectionError, asyncio.TimeoutError, OSError))
          or (status or 0) >= 500):  # includes litellm's InternalServerError, ServiceUnavailable, BadGateway
        kind = ModelErrorKind.TRANSIENT
    elif isinstance(error, (litellm.BadRequestError, litellm.UnprocessableEntityError, litellm.NotFoundError)):
        kind = _unsupported(param, detail) or ModelErrorKind.BAD_REQUEST
    elif isinstance(error, litellm.APIError):
        kind = ModelErrorKind.TRANSIENT
    else:
        return None
    return model_error(kind, detail, **where)


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
    def load(cls, path: Path) -> "ModelQuirks":
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
    rate_limit_retries: int = 2
    max_rate_wait_s: float = 20.0
    """A longer ``retry_after`` is not waited for: the backup model (or the caller) takes over."""
    transient_retries: int = 2
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


class LitellmClient:
    """A ModelClient for every provider litellm reaches; retries, falls back and learns quirks."""

    def __init__(self, quirks: ModelQuirks | None = None, *, retry: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, draw: Callable[[], float] = random.random):
        self.quirks = quirks if quirks is not None else ModelQuirks()
        self.retry, self.sleep, self.draw = retry, sleep, draw

    def native_tools(self, model: str) -> bool:
        return self.quirks.native_tools(model)

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResult]:
        litellm = _litellm or await asyncio.to_thread(load_litellm)
        chain = list(_chain(request.settings))
        for number, settings in enumerate(chain):
            started = False
            try:
                async for piece in self._retrying(litellm, settings, request):
                    started = True
                    yield piece
                return
            except ModelError as error:
                if started or not error.transient or number == len(chain) - 1:
                    raise
                log.warning("model=%s failed (%s), falling back to backup=%s",
                            settings.model, error, chain[number + 1].model)

    async def _retrying(
        self, litellm: ModuleType, settings: ModelSettings, request: ModelRequest
    ) -> AsyncIterator[TextDelta | ModelResult]:
        rate_limits = failures = 0
        while True:
            started = False
            try:
                async for piece in self._call(litellm, settings, request):
                    started = True
                    yield piece
                return
            except ModelError as error:
                if started:
                    raise
                pause = self._pause(error, rate_limits, failures)
                if pause is None:
                    raise
                if error.kind is ModelErrorKind.RATE_LIMITED:
                    rate_limits += 1
                elif error.kind is ModelErrorKind.TRANSIENT:
                    failures += 1
                log.info("model=%s retrying in %.2f s after %s", settings.model, pause, error)
                if pause > 0:
                    await self.sleep(pause)

    def _pause(self, error: ModelError, rate_limits: int, failures: int) -> float | None:
        """How long to wait before trying again, or None to stop trying this model."""
        if error.kind is ModelErrorKind.UNSUPPORTED_STREAMING:
            return 0.0  # a quirk was learned; the next try asks differently
        if error.kind is ModelErrorKind.RATE_LIMITED and rate_limits < self.retry.rate_limit_retries:
            wait = error.retry_after if error.retry_after is not None else self.retry.backoff(rate_limits, self.draw)
            return wait if wait <= self.retry.max_rate_wait_s else None
        if error.kind is ModelErrorKind.TRANSIENT and failures < self.retry.transient_retries:
            return self.retry.backoff(failures, self.draw)
        return None

    def _arguments(self, settings: ModelSettings, request: ModelRequest) -> dict[str, Any]:
        messages = request.messages
        if not self.quirks.native_tools(settings.model):
            messages = text_protocol_messages(messages)  # earlier native calls and results, as markup
        arguments: dict[str, Any] = {
            "model": settings.model,
            "messages": [_wire(m) for m in messages],
            "timeout": settings.timeout_s,
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
        """One request to one model: yields its text, then its result; failures come out as ModelError."""
        model = settings.model
        if request.tools and not self.quirks.native_tools(model):
            raise ToolsUnsupported("known not to take native tools; use the text tool protocol", model=model)
        arguments = self._arguments(settings, request)
        streamed = self.quirks.streaming(model)
        try:
            if streamed:
                if self.quirks.stream_usage(model):
                    arguments["stream_options"] = {"include_usage": True}
                chunks = []
                # ``async with``: the connection is closed even when the caller stops listening half way
                async with await litellm.acompletion(**arguments, stream=True) as stream:
                    thinking = False
                    async for chunk in stream:
                        chunks.append(chunk)
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
                response = await litellm.acompletion(**arguments)
                text = _raw_text(response.choices[0].message) if response.choices else ""
                if text:
                    yield TextDelta(text=text)
        except Exception as raw:
            error = classify(raw, model)
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
