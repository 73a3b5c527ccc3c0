"""Requests are a pure function of the session log; the window respects its budget."""

from __future__ import annotations

from brain.context import HOUSE_RULES, build_request, compose_system, request_digest
from brain.session_log import (
    AssistantSaid,
    Entry,
    Nudged,
    SessionLog,
    Summarized,
    ToolReturned,
    TurnStarted,
    UserSaid,
)
from brain.types import ToolCall, ToolSpec
from gateway.core.config import ModelSettings

SETTINGS = ModelSettings(model="openai/stub-model")
SPEC = ToolSpec(name="knowledge_search", description="search notes", parameters={"type": "object", "properties": {}})


def entries(*events) -> list[Entry]:
    return [Entry(seq=i + 1, event=e) for i, e in enumerate(events)]


def test_system_prompt_order_is_persona_then_house_rules_then_context_then_protocol():
    system = compose_system("You are Ada.", ["Learner notes: likes fractions"], "Call tools like this")
    assert system.index("You are Ada.") == 0
    assert system.index("You are Ada.") < system.index(HOUSE_RULES) < system.index("Learner notes") < system.index("Call tools")


def test_request_contains_history_current_turn_and_tool_rounds():
    log = entries(
        TurnStarted(turn="t1", partner="p", learner="u", model="m", system="S1", tools=(SPEC,)),
        UserSaid(turn="t1", event_id="e1", sender="Ann", text="hi"),
        AssistantSaid(turn="t1", text="hello"),
        TurnStarted(turn="t2", partner="p", learner="u", model="m", system="S2", tools=(SPEC,)),
        UserSaid(turn="t2", event_id="e2", sender="Ann", text="photosynthesis?"),
        AssistantSaid(turn="t2", text="", tool_calls=(ToolCall(id="c1", name="knowledge_search", arguments="{}"),)),
        ToolReturned(turn="t2", call_id="c1", name="knowledge_search", text="plants make sugar"),
    )
    request = build_request(log, SETTINGS)
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", "S2"), ("user", "hi"), ("assistant", "hello"), ("user", "photosynthesis?"),
        ("assistant", ""), ("tool", "plants make sugar"),
    ]
    assert request.tools == (SPEC,)


def test_group_messages_name_their_speaker():
    log = entries(
        TurnStarted(turn="t1", partner="p", learner="u", model="m", system="S"),
        UserSaid(turn="t1", event_id="e1", sender="Ann", text="hi"),
    )
    assert build_request(log, SETTINGS, group=True).messages[-1].content == "Ann: hi"


def test_forced_finish_withdraws_tools_and_text_protocol_sends_none():
    started = TurnStarted(turn="t1", partner="p", learner="u", model="m", system="S", tools=(SPEC,))
    forced = entries(started, UserSaid(turn="t1", event_id="e", sender="A", text="q"),
                     Nudged(turn="t1", text="answer now", withdraw_tools=True))
    assert build_request(forced, SETTINGS).tools == ()
    textual = entries(started.model_copy(update={"text_tool_protocol": True}))
    assert build_request(textual, SETTINGS).tools == ()


def test_old_history_is_windowed_and_summaries_replace_what_they_cover():
    old = [UserSaid(turn="t0", event_id=f"e{i}", sender="A", text="x" * 400) for i in range(50)]
    log = entries(*old, TurnStarted(turn="t1", partner="p", learner="u", model="m", system="S"),
                  UserSaid(turn="t1", event_id="now", sender="A", text="latest"))
    request = build_request(log, SETTINGS, history_tokens=1000)
    history = [m for m in request.messages if m.role == "user"][:-1]
    assert 0 < len(history) < 50 and request.messages[-1].content == "latest"
    summarized = entries(*old[:10], Summarized(turn="t0", text="they talked about x", covers_through=10),
                         TurnStarted(turn="t1", partner="p", learner="u", model="m", system="S"))
    messages = build_request(summarized, SETTINGS).messages
    assert "they talked about x" in messages[1].content
    assert all("x" * 400 != m.content for m in messages)


def test_digest_ignores_credentials_but_not_content(monkeypatch):
    monkeypatch.setenv("K1", "secret-one")
    monkeypatch.setenv("K2", "secret-two")
    log = entries(TurnStarted(turn="t1", partner="p", learner="u", model="m", system="S"))
    a = build_request(log, ModelSettings(model="openai/x", api_key="env:K1"))
    b = build_request(log, ModelSettings(model="openai/x", api_key="env:K2"))
    assert request_digest(a) == request_digest(b)
    c = build_request(entries(TurnStarted(turn="t1", partner="p", learner="u", model="m", system="S'")), SETTINGS)
    assert request_digest(c) != request_digest(a)


async def test_session_log_appends_in_order_and_survives_reopen(tmp_path):
    log = SessionLog(tmp_path / "brain.db")
    await log.append("c1", TurnStarted(turn="t", partner="p", learner="u", model="m", system="S"),
                     UserSaid(turn="t", event_id="e", sender="A", text="hi 👋"))
    await log.append("c2", UserSaid(turn="t", event_id="e", sender="B", text="other"))
    log.close()
    again = SessionLog(tmp_path / "brain.db")
    read = await again.read("c1")
    assert [type(e.event).__name__ for e in read] == ["TurnStarted", "UserSaid"]
    assert read[1].event.text == "hi 👋" and read[0].seq < read[1].seq
    assert await again.forget("c1") == 2 and await again.read("c1") == []
    assert len(await again.read("c2")) == 1
    again.close()


def test_the_window_is_costed_as_the_messages_it_makes_would_be():
    """The history is costed before any message is made; the cost must be exactly the messages' own."""
    from brain.context import _message, _tokens, estimate_tokens
    from brain.session_log import AssistantSaid, Entry, Nudged, ToolReturned, UserSaid
    from brain.types import ToolCall

    events = [UserSaid(turn="t1", event_id="e1", sender="Ana", text="what is 7 x 8?"), Nudged(turn="t1", text="be brief"),
              AssistantSaid(turn="t1", text="", tool_calls=(ToolCall(id="c1", name="calculator", arguments='{"x": "7*8"}'),)),
              ToolReturned(turn="t1", call_id="c1", name="calculator", text="56"), AssistantSaid(turn="t1", text="It is 56.")]
    for group in (False, True):
        for seq, event in enumerate(events, 1):
            entry = Entry(seq=seq, event=event)
            assert _tokens(entry, group) == estimate_tokens(_message(entry, group))
