"""Think tags and text tool markup, filtered from streamed output however the deltas cut them."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain.markup import (
    OutputFilter,
    parse_tool_markup,
    split_output,
    text_protocol_messages,
    tool_call_text,
    tool_protocol_prompt,
)
from brain.types import ChatMessage, ToolCall, ToolSpec

MARKERS = ("<think>", "</think>", "<thinking>", "</thinking>", "<tool_call>", "</tool_call>", "```tool_call")


def cut(text: str, points) -> list[str]:
    points = sorted({p for p in points if 0 < p < len(text)})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def stream(pieces, **options) -> tuple[str, str, str, OutputFilter]:
    """Feed pieces; return what was shown while streaming, the final visible text, the reasoning, the filter."""
    output = OutputFilter(**options)
    shown = "".join(output.feed(piece) for piece in pieces)
    visible, reasoning = output.finish()
    assert visible.startswith(shown), "streamed text is a prefix of the final text"
    return shown, visible, reasoning, output


def counter():
    numbers = itertools.count(1)
    return lambda: f"call_{next(numbers)}"


# --------------------------------------------------------------------------- think tags

THOUGHT = "Hello! <think>The learner greets me; greet back.</think>How can I help?"


def test_think_split_at_every_position_into_two_and_three_pieces():
    for first in range(len(THOUGHT) + 1):
        for second in range(first, len(THOUGHT) + 1):
            _, visible, reasoning, _ = stream(cut(THOUGHT, [first, second]))
            assert (visible, reasoning) == ("Hello! How can I help?", "The learner greets me; greet back."), (first, second)


def test_think_one_character_at_a_time_shows_everything_before_finish():
    shown, visible, reasoning, _ = stream(list(THOUGHT))
    assert shown == visible == "Hello! How can I help?"
    assert reasoning == "The learner greets me; greet back."


text_parts = st.text(alphabet="<>/`thinkgTHINK_cal \n", max_size=25).filter(  # pieces of tags, never a whole one
    lambda t: not any(m in t.lower() for m in MARKERS))


@given(before=text_parts, thought=text_parts, after=text_parts, opener=st.sampled_from(["<think>", "<THINK>", "<thinking>"]),
       points=st.lists(st.integers(min_value=0, max_value=120), max_size=12))
def test_think_tags_split_anywhere(before, thought, after, opener, points):
    closer = "</thinking>" if opener == "<thinking>" else "</think>"
    raw = f"{before}{opener}{thought}{closer}{after}"
    _, visible, reasoning, output = stream(cut(raw, points))
    assert visible == (before + after).lstrip()
    assert reasoning == thought.strip()
    assert output.tool_calls == [] and output.problems == []


@given(text=text_parts, points=st.lists(st.integers(min_value=0, max_value=30), max_size=8))
def test_text_without_markup_passes_unchanged(text, points):
    shown, visible, reasoning, _ = stream(cut(text, points))
    assert visible == text.lstrip() and reasoning == ""


def test_reasoning_blocks_are_kept_apart_and_blank_lines_after_them_dropped():
    visible, reasoning = split_output("<think>first</think>\n\nAnswer <think>second</think>done")
    assert visible == "Answer done"
    assert reasoning == "first\n\nsecond"


def test_an_unclosed_think_makes_the_rest_reasoning():
    raw = "Sure. <think>still thinking when the tokens ran out"
    assert split_output(raw) == ("Sure. ", "still thinking when the tokens ran out")


def test_stray_closing_tags_are_dropped():
    assert split_output("thinking was in the template</think>The answer") == ("thinking was in the templateThe answer", "")


def test_ordinary_angle_brackets_and_code_fences_are_shown():
    text = "If a < b and b > c then a < c.\n```python\nprint('<thinker>')\n```\n<b>bold</b>"
    assert split_output(text) == (text, "")


def test_feed_after_finish_is_a_bug():
    output = OutputFilter()
    output.finish()
    with pytest.raises(RuntimeError):
        output.feed("more")


# --------------------------------------------------------------------------- tool markup

CALL = 'Let me look.<tool_call>{"name": "lookup", "arguments": {"query": "ions < atoms"}}</tool_call>'


def test_tool_markup_split_at_every_position_is_hidden_and_parsed():
    for point in range(len(CALL) + 1):
        shown, visible, _, output = stream(cut(CALL, [point]), new_id=counter())
        assert visible == shown == "Let me look.", point
        assert output.tool_calls == [ToolCall(id="call_1", name="lookup", arguments='{"query": "ions < atoms"}')]
        assert output.problems == []


@given(points=st.lists(st.integers(min_value=0, max_value=len(CALL)), max_size=10))
def test_tool_markup_split_anywhere(points):
    _, visible, _, output = stream(cut(CALL, points))
    assert visible == "Let me look." and [c.name for c in output.tool_calls] == ["lookup"]


def test_fenced_tool_calls_are_hidden_and_parsed():
    text = 'Checking.\n```tool_call\n{"name": "lookup", "arguments": {"query": "cells"}}\n```\nDone.'
    for point in range(len(text) + 1):
        _, visible, _, output = stream(cut(text, [point]))
        assert visible == "Checking.\n\nDone."
        assert [(c.name, json.loads(c.arguments)) for c in output.tool_calls] == [("lookup", {"query": "cells"})]


def test_several_calls_lists_parameters_and_string_arguments():
    text = ('<tool_call>[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "parameters": {"y": 2}}]</tool_call>'
            '<TOOL_CALL>{"name": "c", "arguments": "{\\"z\\": 3}"}</TOOL_CALL>'
            '```tool_calls\n{"name": "d"}\n```')
    calls, problems = parse_tool_markup(text, new_id=counter())
    assert problems == []
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_1", "a", {"x": 1}), ("call_2", "b", {"y": 2}), ("call_3", "c", {"z": 3}), ("call_4", "d", {})]


@pytest.mark.parametrize(("text", "expected"), [
    ('<tool_call>{"name": "lookup", "arguments": {"query": </tool_call>', "is not valid JSON"),
    ('<tool_call>{"arguments": {}}</tool_call>', 'needs a "name"'),
    ('<tool_call>{"name": "lookup", "arguments": [1, 2]}</tool_call>', "must be a JSON object"),
    ("<tool_call>[]</tool_call>", "was empty"),
    ('<tool_call>{"name": "lookup", "arguments": {"q"', "was not closed with </tool_call>"),
])
def test_malformed_markup_is_a_problem_not_an_exception(text, expected):
    shown, visible, _, output = stream(["Answer first. ", text])
    assert visible == "Answer first. " and output.tool_calls == []
    assert len(output.problems) == 1 and expected in output.problems[0]
    assert '<tool_call>{"name": "tool_name"' in output.problems[0]  # tells the model the right shape


def test_an_unclosed_call_with_complete_json_still_counts():
    calls, problems = parse_tool_markup('<tool_call>{"name": "lookup", "arguments": {}}')
    assert [c.name for c in calls] == ["lookup"] and problems == []


def test_generated_ids_are_unique():
    calls, _ = parse_tool_markup('<tool_call>{"name": "a"}</tool_call>' * 3)
    assert len({c.id for c in calls}) == 3 and all(c.id.startswith("call_") for c in calls)


# --------------------------------------------------------------------------- the text tool protocol

SPECS = (
    ToolSpec(name="lookup", description="Look a topic up in the course notes.",
             parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
    ToolSpec(name="hand_off", description="Ask the teacher to step in.", parameters={"type": "object", "properties": {}}),
)


def test_tool_protocol_prompt_lists_every_tool_and_the_shape():
    prompt = tool_protocol_prompt(SPECS)
    for spec in SPECS:
        assert f"- {spec.name}: {spec.description}" in prompt
        assert json.dumps(spec.parameters) in prompt
    assert "<tool_call>" in prompt and "<tool_result" in prompt
    assert tool_protocol_prompt(()) == ""


def test_calls_written_as_the_prompt_says_parse_back():
    call = ToolCall(id="call_9", name="lookup", arguments='{"query": "Zellkern – Aufbau"}')
    calls, problems = parse_tool_markup(tool_call_text(call))
    assert problems == [] and [(c.name, c.arguments) for c in calls] == [("lookup", call.arguments)]


def test_history_with_native_calls_becomes_text_protocol():
    calls = (ToolCall(id="1", name="lookup", arguments='{"query": "a"}'), ToolCall(id="2", name="hand_off"))
    history = (
        ChatMessage(role="user", content="hi"),
        ChatMessage(role="assistant", tool_calls=calls),
        ChatMessage(role="tool", content="A is a letter.", tool_call_id="1", name="lookup"),
        ChatMessage(role="tool", content="Teacher told.", tool_call_id="2", name="hand_off"),
        ChatMessage(role="assistant", content="Done."),
    )
    converted = text_protocol_messages(history)
    assert [m.role for m in converted] == ["user", "assistant", "user", "assistant"]
    assert all(not m.tool_calls and m.tool_call_id is None for m in converted)
    assert [c.name for c in parse_tool_markup(converted[1].content)[0]] == ["lookup", "hand_off"]
    assert converted[2].content == ('<tool_result name="lookup">\nA is a letter.\n</tool_result>\n'
                                    '<tool_result name="hand_off">\nTeacher told.\n</tool_result>')


@given(text=st.text(alphabet="<>/`tTihnkgoc_l x", max_size=24))
def test_the_held_back_tail_is_the_longest_that_could_start_a_marker(text):
    """The set lookup gives what testing every tail against every marker gives (the plain definition)."""
    from brain.markup import _TEXT_MARKERS, _partial_marker

    plain = max((size for size in range(1, min(len(text), 12) + 1)
                 if any(m.startswith(text[-size:].lower()) and len(m) > size for m in _TEXT_MARKERS)), default=0)
    assert _partial_marker(text, _TEXT_MARKERS) == plain
