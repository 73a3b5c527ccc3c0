"""Does a partner's model answer?  One request for one token, to the model and to its backup.

``partners doctor`` asks before any learner does.  The request goes through
litellm exactly as a turn's would (same ``api_base``, key and timeout, no
retries), so what fails here fails for learners; its failure is classified by
:func:`brain.model.classify` and said as the teacher can act on it ("nothing
answers at http://127.0.0.1:11434 (connection refused): is Ollama running?").
A provider's own words are kept only where they help, and never with the key.
"""

from __future__ import annotations

import asyncio

from brain.model import ModelError, ModelErrorKind, classify, load_litellm
from gateway.core.config import ModelSettings
from gateway.core.probes import Gravity, ProbeResult, Problem
from gateway.endpoints import origin, why_unreachable

PROBE_TIMEOUT_S = 15.0
OLLAMA_DEFAULT = "http://localhost:11434"


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


def _where(settings: ModelSettings) -> str:
    if settings.api_base:
        return origin(settings.api_base)
    if _provider(settings.model) in ("ollama", "ollama_chat"):
        return OLLAMA_DEFAULT
    return f"the {_provider(settings.model)} API"


def _key_variable(settings: ModelSettings) -> str:
    return f"{_provider(settings.model).upper().replace('-', '_')}_API_KEY"


def _redact(text: str, settings: ModelSettings) -> str:
    if settings.api_key is not None and settings.api_key.get_secret_value():
        text = text.replace(settings.api_key.get_secret_value(), "<api key>")
    return text[:300]


def describe_failure(error: ModelError, raw: BaseException, settings: ModelSettings) -> Problem:
    """A failed probe request as the problem and its fix."""
    model, where = settings.model, _where(settings)
    if error.kind is ModelErrorKind.AUTH:
        refused = error.status in (401, 403)  # litellm reports a key it never had as a 500 of its own
        if settings.api_key is None and not refused:
            return Problem(message=f"{model} needs an API key and none is set",
                           fix=f"add `api_key: env:{_key_variable(settings)}` under model: and export {_key_variable(settings)}=...")
        source = "the variable api_key names" if settings.api_key is not None else \
            f"the environment (the provider's own variable, such as {_key_variable(settings)})"
        return Problem(message=f"{where} refused the API key for {model}" + (f" ({error.status})" if error.status else ""),
                       fix=f"check the key in {source}: it may be mistyped, revoked or for another provider")
    if error.kind is ModelErrorKind.RATE_LIMITED:
        return Problem(gravity=Gravity.WARNING, message=f"{where} is rate limiting {model} (429): the key works",
                       fix="nothing now; if learners wait often, raise the plan's limits or set a backup model")
    why = why_unreachable(raw)
    if why is not None:
        hint = "is Ollama running (`ollama serve`)?" if _provider(model).startswith("ollama") else \
            "is the model server running, and is api_base its address?"
        return Problem(message=f"nothing answers at {where} ({why})", fix=hint)
    if error.kind is ModelErrorKind.TRANSIENT:
        return Problem(message=f"{where} failed the test request for {model}"
                               + (f" ({error.status})" if error.status else "") + f": {_redact(error.message, settings)}",
                       fix="try again in a minute; if it lasts, check the provider's status page and api_base")
    if error.status == 404 or "not found" in error.message.lower() or "does not exist" in error.message.lower():
        pull = f" (for Ollama: `ollama pull {model.split('/', 1)[-1]}`)" if _provider(model).startswith("ollama") else ""
        return Problem(message=f"{where} has no model {model}", fix=f"check the model name in model:{pull}")
    return Problem(message=f"{where} refused the test request for {model}"
                           + (f" ({error.status})" if error.status else "") + f": {_redact(error.message, settings)}",
                   fix="check model: and api_base")


async def _ask(settings: ModelSettings, timeout: float) -> Problem | None:
    litellm = await asyncio.to_thread(load_litellm)
    arguments = {
        "model": settings.model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 1,
        "timeout": min(settings.timeout_s, timeout),
        "max_retries": 0,
    }
    if settings.api_base:
        arguments["api_base"] = settings.api_base
    if settings.api_key is not None:
        arguments["api_key"] = settings.api_key.get_secret_value()
    try:
        await litellm.acompletion(**arguments)
    except Exception as raw:  # whatever litellm raises: classified, never passed on
        error = classify(raw, settings.model)
        if error is None:
            return Problem(message=f"the test request to {settings.model} failed: {type(raw).__name__}",
                           fix="check model: and api_base; `partners serve --log-level debug` shows more")
        return describe_failure(error, raw, settings)
    return None


async def probe_model(settings: ModelSettings, *, timeout: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Ask the model, then each backup, for one token; every one that fails is a problem."""
    chain: list[ModelSettings] = []
    current: ModelSettings | None = settings
    while current is not None:
        chain.append(current)
        current = current.backup
    found = await asyncio.gather(*(_ask(s, timeout) for s in chain))
    problems = []
    for number, (each, problem) in enumerate(zip(chain, found, strict=True)):
        if problem is not None:
            label = "" if number == 0 else f"backup {each.model}: "
            problems.append(problem.model_copy(update={"message": label + problem.message}))
    names = " (backup ".join(s.model for s in chain) + ")" * (len(chain) - 1)
    return ProbeResult(checked=f"{names} answers", problems=tuple(problems))
