"""The brain's own vocabulary: chat messages, tool calls and model requests.

These are provider-neutral (OpenAI-shaped, as litellm speaks); the session log
stores them and rebuilds every model request from them.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from gateway.core.config import ModelSettings


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Model):
    id: str
    name: str
    arguments: str = "{}"
    """The raw JSON text the model wrote; validated by the tool's argument model before running."""


class ChatMessage(_Model):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


class ToolSpec(_Model):
    """A tool as the model sees it: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(_Model):
    settings: ModelSettings
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    partner: str = ""
    """Whose call this is, for the model health report (``brain.health``); empty: nobody's, not reported."""


class FinishReason(str, Enum):
    STOP = "stop"
    TOOL_CALLS = "tool_calls"
    LENGTH = "length"


class Usage(_Model):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0


class TextDelta(_Model):
    """Raw text as the model streams it (think tags and tool markup not yet removed)."""

    kind: Literal["delta"] = "delta"
    text: str


class ModelResult(_Model):
    """The end of one model call: all text, native tool calls, why it stopped, what it cost."""

    kind: Literal["result"] = "result"
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason = FinishReason.STOP
    usage: Usage = Usage()
    model: str = ""
