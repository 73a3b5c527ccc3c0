"""Filters for raw model output: what the learner sees, what was reasoning, what was a tool call.

Models mix three things into their text:

- reasoning in ``<think>…</think>`` (or ``<thinking>…</thinking>``): kept for the
  log, never shown;
- tool calls written as text by models without native tool calling (the *text
  tool protocol*, see :func:`tool_protocol_prompt`):
  ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``, or the same JSON in
  a fenced block opened by three backticks and ``tool_call``; parsed into
  :class:`~brain.types.ToolCall` s, never shown;
- the answer: everything else.

:class:`OutputFilter` separates them while the text streams in, whatever way
the deltas cut the tags: it holds back only the few characters that might
begin a tag.  Tags are matched without regard to case.  The visible text never
starts with whitespace (models put blank lines after their reasoning), and a
stray closing tag is dropped.  Malformed tool markup is never raised: it comes
back as a *problem*, a sentence the loop can hand to the model so it can try again.

:func:`text_protocol_messages` writes a conversation's native tool calls and
results in the text protocol, for models that take no ``tools``.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from brain.types import ChatMessage, ToolCall, ToolSpec

_REASONING, _TOOL = "reasoning", "tool"
_THINK_CLOSERS = ("</think>", "</thinking>")
_OPENERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "<think>": (_REASONING, _THINK_CLOSERS),
    "<thinking>": (_REASONING, _THINK_CLOSERS),
    "<tool_call>": (_TOOL, ("</tool_call>",)),
    "```tool_call": (_TOOL, ("```",)),
}
_STRAY = ("</think>", "</thinking>", "</tool_call>")
_TEXT_MARKERS = tuple(_OPENERS) + _STRAY

SHAPE = '<tool_call>{"name": "tool_name", "arguments": {...}}</tool_call>'


def _pattern(markers: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True)), re.IGNORECASE)


_TEXT_PATTERN = _pattern(_TEXT_MARKERS)
_CLOSER_PATTERNS = {closers: _pattern(closers) for _, closers in _OPENERS.values()}


@functools.cache
def _starts_of(markers: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str], int]:
    """Every proper start of ``markers`` (lower case), their first characters, and the longest start's length."""
    starts = frozenset(marker[:size].lower() for marker in markers for size in range(1, len(marker)))
    return starts, frozenset(marker[0].lower() for marker in markers), max(map(len, markers)) - 1


def _partial_marker(text: str, markers: tuple[str, ...]) -> int:
    """Length of the longest end of ``text`` that could be the start of one of ``markers``.

    Run on every streamed delta, so it looks a tail up in a set, and only a tail that begins with a
    marker's first character (``<`` or a backtick), instead of testing every tail against every marker."""
    starts, firsts, longest = _starts_of(markers)
    for size in range(min(len(text), longest), 0, -1):
        if text[-size].lower() in firsts and text[-size:].lower() in starts:
            return size
    return 0


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:16]}"


class OutputFilter:
    """A streaming filter: ``feed`` each raw delta, show what it returns, then ``finish``.

    The pieces ``feed`` returns, joined, are always a prefix of the visible text
    ``finish`` returns; ``tool_calls`` and ``problems`` are complete after ``finish``.
    """

    def __init__(self, *, new_id: Callable[[], str] = new_call_id):
        self._new_id = new_id
        self._buffer = ""
        self._mode: str | None = None  # None (answer text), _REASONING or _TOOL
        self._closers: tuple[str, ...] = ()
        self._opener = ""
        self._block: list[str] = []
        self._visible: list[str] = []
        self._reasoning: list[str] = []
        self._done = False
        self.tool_calls: list[ToolCall] = []
        self.problems: list[str] = []

    def feed(self, delta: str) -> str:
        """Take more raw text; return the part of it that can be shown now."""
        if self._done:
            raise RuntimeError("OutputFilter.feed after finish")
        self._buffer += delta
        shown: list[str] = []
        while self._buffer:
            if self._mode is None:
                match = _TEXT_PATTERN.search(self._buffer)
                end = match.start() if match else len(self._buffer) - _partial_marker(self._buffer, _TEXT_MARKERS)
                shown.append(self._buffer[:end])
                if match is None:
                    self._buffer = self._buffer[end:]
                    break
                self._buffer = self._buffer[match.end():]
                self._open(match.group().lower())
            else:
                match = _CLOSER_PATTERNS[self._closers].search(self._buffer)
                end = match.start() if match else len(self._buffer) - _partial_marker(self._buffer, self._closers)
                self._take(self._buffer[:end])
                if match is None:
                    self._buffer = self._buffer[end:]
                    break
                self._buffer = self._buffer[match.end():]
                self._close(complete=True)
        return self._show("".join(shown))

    def finish(self) -> tuple[str, str]:
        """End of output: return the whole visible text and the reasoning.

        An unclosed ``<think>`` made the rest reasoning; an unclosed tool call
        still counts if its JSON is complete, else it is a problem.
        """
        if not self._done:
            self._done = True
            if self._mode is None:
                self._show(self._buffer)
            else:
                self._take(self._buffer)
                self._close(complete=False)
            self._buffer = ""
        return "".join(self._visible), "".join(self._reasoning).strip()

    @property
    def visible(self) -> str:
        return "".join(self._visible)

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning).strip()

    # ------------------------------------------------------------------ states

    def _show(self, text: str) -> str:
        if not self._visible:
            text = text.lstrip()
        if text:
            self._visible.append(text)
        return text

    def _open(self, marker: str) -> None:
        if marker not in _OPENERS:
            return  # a stray closing tag: dropped
        self._mode, self._closers = _OPENERS[marker]
        self._opener, self._block = marker, []
        if self._mode == _REASONING and self._reasoning:
            self._reasoning.append("\n\n")

    def _take(self, text: str) -> None:
        (self._reasoning if self._mode == _REASONING else self._block).append(text)

    def _close(self, *, complete: bool) -> None:
        if self._mode == _TOOL:
            raw = "".join(self._block)
            calls, problem = parse_call_block(raw, fenced=self._opener.startswith("`"), new_id=self._new_id)
            if problem and not complete:
                problem = f"the tool call was not closed with {self._closers[0]} ({problem})"
            self.tool_calls.extend(calls)
            if problem:
                self.problems.append(problem)
        self._mode, self._closers, self._block = None, (), []


def parse_call_block(
    raw: str, *, fenced: bool = False, new_id: Callable[[], str] = new_call_id
) -> tuple[list[ToolCall], str | None]:
    """The calls in one tool-call block (one object, or a list of them), or a problem to tell the model."""
    body = raw.strip()
    if fenced and body[:1] not in ("{", "["):  # the rest of the fence's info line ("s", " json")
        body = body.partition("\n")[2].strip()
    shown = body if len(body) <= 120 else body[:117] + "..."
    try:
        data: Any = json.loads(body)
    except json.JSONDecodeError as error:
        where = f"{error.msg} at column {error.colno}"
        return [], f"your tool call {shown!r} is not valid JSON ({where}); write it as {SHAPE}"
    calls = []
    for item in data if isinstance(data, list) else [data]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            return [], f"your tool call {shown!r} needs a \"name\" and \"arguments\"; write it as {SHAPE}"
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                pass
        if not isinstance(arguments, dict):
            return [], f"the arguments of your call to {item['name']} must be a JSON object; write it as {SHAPE}"
        calls.append(ToolCall(id=new_id(), name=item["name"], arguments=json.dumps(arguments, ensure_ascii=False)))
    if not calls:
        return [], f"your tool call block was empty; write it as {SHAPE}"
    return calls, None


def parse_tool_markup(text: str, *, new_id: Callable[[], str] = new_call_id) -> tuple[list[ToolCall], list[str]]:
    """The tool calls written as markup in a whole answer, and the problems with malformed ones."""
    output = OutputFilter(new_id=new_id)
    output.feed(text)
    output.finish()
    return output.tool_calls, output.problems


def split_output(text: str) -> tuple[str, str]:
    """A whole answer's visible text and reasoning (the streaming filter, fed at once)."""
    output = OutputFilter()
    output.feed(text)
    return output.finish()


# --------------------------------------------------------------------------- the text tool protocol


def tool_protocol_prompt(specs: Sequence[ToolSpec]) -> str:
    """The system-prompt section that teaches a model without native tool calling to call ``specs``."""
    if not specs:
        return ""
    tools = "\n".join(
        f"- {spec.name}: {spec.description.strip()}\n"
        f"  arguments (JSON schema): {json.dumps(spec.parameters, ensure_ascii=False)}"
        for spec in specs
    )
    return f"""## Tools
You can use the tools listed below.  To call one, write a tool call block:
{SHAPE}
- The block holds one JSON object: "name" is the tool's name and "arguments" an object that
  matches the tool's schema.  Write one block per call; write several blocks to call several tools.
- After your tool calls, stop writing.  The results come back in the next message as
  <tool_result name="tool_name">...</tool_result>.  Never write a tool result yourself.
- The learner does not see tool calls or results: answer in your own words once you have what you need.
- If a call was malformed you will be told what was wrong; correct it and call again.

Available tools:
{tools}"""


def tool_result_text(name: str, content: str) -> str:
    return f'<tool_result name="{name}">\n{content}\n</tool_result>'


def tool_call_text(call: ToolCall) -> str:
    try:
        arguments: Any = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        arguments = call.arguments
    return f"<tool_call>{json.dumps({'name': call.name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"


def text_protocol_messages(messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The conversation with native tool calls written as markup and tool results as user messages."""
    out: list[ChatMessage] = []
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            calls = "\n".join(tool_call_text(c) for c in message.tool_calls)
            out.append(ChatMessage(role="assistant", content=f"{message.content}\n{calls}".strip()))
        elif message.role == "tool":
            result = tool_result_text(message.name or "tool", message.content)
            if out and out[-1].role == "user" and out[-1].content.startswith("<tool_result"):
                out[-1] = ChatMessage(role="user", content=f"{out[-1].content}\n{result}")
            else:
                out.append(ChatMessage(role="user", content=result))
        else:
            out.append(message)
    return tuple(out)
