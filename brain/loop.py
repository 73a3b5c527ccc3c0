"""The agent loop: one implementation of ``Responder`` for every partner and channel.

Only the persona, the tools that survive subtraction, the memory scopes and
the model differ between partners.  A turn runs in *rounds*: each round is one
model call whose streamed text is shown as it comes (think tags and tool
markup filtered out).  A round that asks for tools runs them and feeds their
results to the next round; a round without tool calls is the answer.

Rules, each with a test:
- a budget of ``max_rounds`` rounds, then ``settle_rounds`` rounds told to wrap
  up, then one forced finish with tools withdrawn;
- output cut off by the length limit continues in the next round;
- an empty answer gets one nudge, then a plain apology;
- messages that arrived mid-turn join at the next round boundary
  (``Turn.take_arrivals``; the pipeline queues them instead for queue-mode partners);
- models without native tool calling get the text tool protocol, parsed and
  executed, never shown;
- daily token budgets end with a friendly message;
- a model that stays unavailable (after its deadlines, one retry and its
  ``backup``, all in ``brain.model``) never shows internal error text: if the
  learner has seen nothing yet, the partner answers from its notes and
  knowledge base with one sentence saying the tutor is having trouble; if
  part of the answer was already shown, that part stays and one sentence says
  it broke off (the preview is the reply's first part, ADR 0004: replacing it
  with something else would look garbled).  A summary that fails for the same
  reason sends the turn to the notes at once rather than making the learner
  wait out the same dead model twice (ADR 0013);
- with a memory service, a direct conversation's history is the *person's*
  (it follows them across linked chat apps), one turn runs at a time per
  person (per group in groups), and the system prompt carries the blocks of
  the turn's readable memory scopes;
- learner commands (``brain.commands``) are answered without the model; in a
  turn that also holds other messages they run after the answer and their
  replies are appended to it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

from brain.commands import Commands, command_of
from brain.context import build_request, compose_system, history_to_fold, request_digest, transcript
from brain.locks import KeyedLocks
from brain.markup import OutputFilter, parse_tool_markup, split_output, tool_protocol_prompt
from brain.memory.scopes import Session
from brain.model import ModelClient, ModelError, ModelErrorKind
from brain.notes import OfflineReason
from brain.session_log import (
    AssistantSaid,
    ModelAnswered,
    ModelRequested,
    Nudged,
    SessionLog,
    Summarized,
    ToolReturned,
    TurnEnded,
    TurnStarted,
    UserSaid,
)
from brain.tools.base import ToolContext, ToolServices
from brain.tools.registry import ToolRegistry
from brain.tools.surface import SurfaceContext, ToolSurface, tool_surface
from brain.types import ChatMessage, FinishReason, ModelRequest, ModelResult, TextDelta, ToolCall, Usage
from brain.usage import UsageLedger
from gateway.core.config import ModelSettings
from gateway.core.events import RuntimeEvent, StreamDelta, StreamEnd, TurnEnd
from gateway.core.messages import ConversationKind, InboundMessage
from gateway.core.phrases import ENGLISH, Phrase, language_for, say
from gateway.core.turns import Turn
from personas.loader import Persona

log = logging.getLogger(__name__)

CONTINUE = "Your previous message was cut off by the length limit. Continue exactly where it stopped."
EMPTY_NUDGE = "Your last reply was empty. Please answer the learner's message now."
WRAP_UP = "You have used most of your steps for this message. Finish what you are doing and answer the learner."
FORCED = "Answer the learner now, in your own words, without using any tools."
APOLOGY = say(Phrase.MODEL_APOLOGY, ENGLISH)
"""The English of the learner-facing phrases here; a turn says them in its language (``gateway/core/phrases.toml``)."""
BUDGET_LEARNER = say(Phrase.BUDGET_LEARNER, ENGLISH)
SUMMARIZE = (
    "Summarize this tutoring conversation for the tutor's own memory: what the learner is working on, "
    "what they understood or struggled with, and anything promised. At most 150 words, plain text."
)
BUDGET_PARTNER = say(Phrase.BUDGET_PARTNER, ENGLISH)
BROKE_OFF = say(Phrase.BROKE_OFF, ENGLISH)
"""Ends an answer whose beginning the learner has already seen when the model stops mid-way."""


@dataclass(frozen=True)
class BrainSettings:
    history_tokens: int = 6000


class TurnMemory(Protocol):
    """What the loop needs from memory (``brain.memory.service.MemoryService``)."""

    async def session(self, turn: Turn) -> Session:
        """The speaker as a person, and the turn's history key, lock key and scopes."""
        ...

    async def context_blocks(self, turn: Turn, session: Session | None = None) -> list[str]:
        """System-prompt blocks for the turn's readable scopes."""
        ...


class NotesFallback(Protocol):
    """Answers a turn without a model (``brain.notes.NotesResponder``), saying why in its first line."""

    def respond(self, turn: Turn, *, because: OfflineReason = OfflineReason.NO_MODEL) -> AsyncIterator[RuntimeEvent]:
        ...


class Brain:
    """Implements ``gateway.core.turns.Responder``; a partner without a model, or whose model fails, goes to ``fallback``."""

    name = "brain"

    def __init__(
        self,
        *,
        persona_for: Callable[[str], Persona],
        model: ModelClient,
        tools: ToolRegistry,
        services: ToolServices,
        log_: SessionLog,
        usage: UsageLedger,
        fallback: NotesFallback,
        settings: BrainSettings = BrainSettings(),
        memory: TurnMemory | None = None,
        commands: Commands | None = None,
        locks: KeyedLocks | None = None,
    ) -> None:
        self.persona_for = persona_for
        self.model = model
        self.tools = tools
        self.services = services
        self.log = log_
        self.usage = usage
        self.fallback = fallback
        self.settings = settings
        self.memory = memory
        self.commands = commands
        self.locks = locks if locks is not None else KeyedLocks()
        """One turn at a time per person (per group in groups); ``/link`` also takes the other person's, and
        a teacher's edit of a learner (``brain.memory.guarded``, handed the same instance) waits on it."""

    async def respond(self, turn: Turn) -> AsyncIterator[RuntimeEvent]:
        session = await self.memory.session(turn) if self.memory is not None else None
        final: list[RuntimeEvent] = []
        async with self.locks.hold(session.lock_key if session else turn.address.conversation_key):
            async for event in self._respond(turn, session):
                if isinstance(event, (StreamEnd, TurnEnd)):
                    final.append(event)  # sent after the lock is released: the pipeline stops reading at TurnEnd
                else:
                    yield event
        for event in final:
            yield event

    async def _respond(self, turn: Turn, session: Session | None) -> AsyncIterator[RuntimeEvent]:
        commands: list[InboundMessage] = []
        if self.commands is not None and session is not None:
            turn = _divert_commands(turn, commands)
        end: list[RuntimeEvent] = []
        if turn.messages:
            async for event in self._answer(turn, session):
                if isinstance(event, (StreamEnd, TurnEnd)):
                    end.append(event)
                else:
                    yield event
        if not commands or self.commands is None or session is None:
            for event in end:
                yield event
            return
        answer = next((e for e in end if isinstance(e, StreamEnd)), None)
        parts = [answer.markdown] if answer is not None and answer.markdown.strip() else []
        for message in commands:
            parts.append(await self.commands.run(turn, message, session, self.locks))
        yield StreamEnd(markdown="\n\n".join(parts), attachments=answer.attachments if answer is not None else ())
        yield TurnEnd()

    async def _answer(self, turn: Turn, session: Session | None) -> AsyncIterator[RuntimeEvent]:
        persona = self.persona_for(turn.partner.persona)
        settings = turn.partner.model or persona.model
        if settings is None:
            async for event in self.fallback.respond(turn):
                yield event
            return
        run = _TurnRun(self, turn, persona, settings, session)
        async for event in run.events():
            yield event


def _divert_commands(turn: Turn, commands: list[InboundMessage]) -> Turn:
    """The turn without its command messages; commands among later arrivals are diverted too."""
    commands.extend(m for m in turn.messages if command_of(m))
    take = turn.take_arrivals

    def take_arrivals() -> list[InboundMessage]:
        arrivals = take()
        commands.extend(m for m in arrivals if command_of(m))
        return [m for m in arrivals if not command_of(m)]

    return dataclasses.replace(turn, messages=[m for m in turn.messages if not command_of(m)], take_arrivals=take_arrivals)


@dataclass(frozen=True)
class _RoundOutcome:
    """What one model call produced, logged in one write after it."""

    requested: ModelRequested
    result: ModelResult
    visible: str
    reasoning: str
    calls: tuple[ToolCall, ...]
    nudges: tuple[Nudged, ...]


class _TurnRun:
    """The state of one turn: its id, surface, rounds and what it has shown so far."""

    def __init__(self, brain: Brain, turn: Turn, persona: Persona, settings: ModelSettings, session: Session | None) -> None:
        self.brain = brain
        self.turn = turn
        self.persona = persona
        self.settings = settings
        self.session = session
        self.id = uuid.uuid4().hex[:12]
        self.conversation = session.history_key if session else turn.address.conversation_key
        """The session-log key: the person's history with this partner, or the group's conversation."""
        self.learner = session.usage_key if session else turn.sender.user
        """Whose daily budget this turn spends."""
        self.group = turn.address.conversation.kind is ConversationKind.GROUP
        self.language = language_for(turn.partner.languages or persona.languages, turn.sender.locale)
        """The language of the turn's own notices: the learner's if the partner speaks it, else the partner's."""
        self.usage = Usage()
        self.shown = ""
        self.context: list[str] | None = None

    # ------------------------------------------------------------------ setup

    def surface(self) -> ToolSurface:
        """The persona's tools minus what the persona's, the partner's and the group's rules take away."""
        rules = (*self.persona.tool_rules, *self.turn.partner.tool_rules, *self.turn.context_rules)
        return tool_surface(self.persona.tools, self.persona.forced_tools, rules, SurfaceContext.of(self.turn))

    def persona_block(self) -> str:
        p = self.persona
        head = f"You are {p.name}. {p.description}".strip()
        return f"{head}\n\n{p.soul.strip()}"

    async def summarize_if_needed(self) -> None:
        """Fold history that no longer fits the window into a summary written by the model.

        Runs before the turn is logged, so every request of the turn is built on the same
        history; a failed summary is skipped (windowing alone still bounds the request)."""
        entries = await self.brain.log.read(self.conversation)
        folded = history_to_fold(entries, self.brain.settings.history_tokens, self.group)
        if not folded:
            return
        request = ModelRequest(settings=self.settings, partner=self.turn.partner.id, messages=(
            ChatMessage(role="system", content=SUMMARIZE),
            ChatMessage(role="user", content=transcript(folded)),
        ))
        try:
            result = None
            async for item in self.brain.model.stream(request):
                if isinstance(item, ModelResult):
                    result = item
        except ModelError as error:
            log.info("summary skipped conversation=%s error=%s", self.conversation, error)
            if error.transient:
                raise  # the model and its backup just failed their deadlines: do not make the learner wait twice
            return
        if result is not None:
            self.add_usage(result.usage)  # a summary is part of this turn's cost
        if result is not None and result.text.strip():
            visible, _reasoning = split_output(result.text)
            await self.brain.log.append(
                self.conversation, Summarized(turn=self.id, text=visible.strip(), covers_through=folded[-1].seq)
            )

    async def start(self, surface: ToolSurface, text_protocol: bool, *, said: bool = True) -> None:
        """Log the turn's system prompt and tools, then (``said``) the messages that began it."""
        specs = tuple(self.brain.tools.specs(sorted(surface.tools)))
        protocol = tool_protocol_prompt(specs) if text_protocol and specs else None
        if self.context is None:
            memory = self.brain.memory
            self.context = await memory.context_blocks(self.turn, self.session) if memory and self.session else []
        system = compose_system(self.persona_block(), self.context, protocol)
        events: list[TurnStarted | UserSaid] = [
            TurnStarted(
                turn=self.id, partner=self.turn.partner.id, learner=self.turn.sender.user, model=self.settings.model,
                system=system, tools=specs, text_tool_protocol=text_protocol, removed_tools=surface.removed,
            )
        ]
        if said:
            events += [self._user(m) for m in self.turn.messages]
        await self.brain.log.append(self.conversation, *events)
        log.info("turn started conversation=%s partner=%s tools=%s removed=%s",
                 self.conversation, self.turn.partner.id, ",".join(sorted(surface.tools)) or "-", surface.removed or "-")

    def _user(self, message) -> UserSaid:
        return UserSaid(turn=self.id, event_id=message.event_id, sender=message.sender.display_name or message.sender.user,
                        text=message.text, user=message.sender.user)

    # ------------------------------------------------------------------ the rounds

    async def events(self) -> AsyncIterator[RuntimeEvent]:
        refusal = await self._over_budget()
        if refusal:
            await self.brain.log.append(self.conversation, TurnEnded(turn=self.id, outcome="budget"))
            yield StreamEnd(markdown=refusal)
            yield TurnEnd()
            return
        surface = self.surface()
        text_protocol = not self.brain.model.native_tools(self.settings.model)
        try:
            await self.summarize_if_needed()
        except ModelError as error:
            await self.start(surface, text_protocol)
            async for event in self._without_model(error):
                yield event
            return
        await self.start(surface, text_protocol)
        policies = self.persona.policies
        answer = ""
        nudged_empty = False
        try:
            for round_no in range(policies.max_rounds + policies.settle_rounds + 1):
                if round_no == policies.max_rounds:
                    await self.brain.log.append(self.conversation, Nudged(turn=self.id, text=WRAP_UP))
                if round_no == policies.max_rounds + policies.settle_rounds:
                    await self.brain.log.append(self.conversation, Nudged(turn=self.id, text=FORCED, withdraw_tools=True))
                if round_no > 0:
                    await self._merge_arrivals()
                try:
                    outcome: _RoundOutcome | None = None
                    async for item in self._round(round_no):
                        if isinstance(item, StreamDelta):
                            self.shown += item.text
                            yield item
                        else:
                            outcome = item
                except ModelError as error:
                    if error.kind is ModelErrorKind.UNSUPPORTED_TOOLS and not text_protocol:
                        text_protocol = True
                        # A fresh TurnStarted switches the protocol; the messages are logged already.
                        await self.start(surface, text_protocol, said=False)
                        continue
                    raise
                assert outcome is not None, "a round always ends with its outcome"
                result, visible, calls = outcome.result, outcome.visible, outcome.calls
                # One write per round: the request's digest, the answer and its usage (and any
                # complaint about malformed tool markup, which the next request carries).
                await self.brain.log.append(
                    self.conversation,
                    outcome.requested,
                    AssistantSaid(turn=self.id, text=visible, tool_calls=calls, reasoning=outcome.reasoning),
                    ModelAnswered(turn=self.id, model=result.model or self.settings.model,
                                  finish_reason=result.finish_reason.value, usage=result.usage),
                    *outcome.nudges,
                )
                if calls:
                    await self._run_tools(calls, surface)
                    continue
                answer += visible
                if result.finish_reason is FinishReason.LENGTH:
                    await self.brain.log.append(self.conversation, Nudged(turn=self.id, text=CONTINUE))
                    continue
                if not answer.strip():
                    if not nudged_empty:
                        nudged_empty = True
                        await self.brain.log.append(self.conversation, Nudged(turn=self.id, text=EMPTY_NUDGE))
                        continue
                    answer = say(Phrase.MODEL_APOLOGY, self.language)
                break
            else:
                answer = answer or say(Phrase.MODEL_APOLOGY, self.language)
        except ModelError as error:
            async for event in self._without_model(error):
                yield event
            return
        except asyncio.CancelledError:
            await asyncio.shield(self._end("stopped"))
            raise
        await self._end("answered")
        yield StreamEnd(markdown=answer)
        yield TurnEnd()

    async def _without_model(self, error: ModelError) -> AsyncIterator[RuntimeEvent]:
        """End a turn whose model (and backup) failed: notes if nothing was shown, else what was shown, marked cut."""
        log.warning("model unavailable conversation=%s partner=%s kind=%s error=%s",
                    self.conversation, self.turn.partner.id, error.kind.value, error)
        await self._end("model_unavailable")
        if self.shown.strip():
            yield StreamEnd(markdown=f"{self.shown.rstrip()}\n\n{say(Phrase.BROKE_OFF, self.language)}")
            yield TurnEnd()
            return
        async for event in self.brain.fallback.respond(self.turn, because=OfflineReason.MODEL_TROUBLE):
            yield event

    async def _round(self, round_no: int) -> AsyncIterator[StreamDelta | _RoundOutcome]:
        entries = await self.brain.log.read(self.conversation)
        request = build_request(entries, self.settings, history_tokens=self.brain.settings.history_tokens, group=self.group)
        request = request.model_copy(update={"partner": self.turn.partner.id})
        requested = ModelRequested(turn=self.id, round=round_no, digest=request_digest(request))
        visible_filter = OutputFilter()
        result: ModelResult | None = None
        async for item in self.brain.model.stream(request):
            if isinstance(item, TextDelta):
                shown = visible_filter.feed(item.text)
                if shown:
                    yield StreamDelta(text=shown)
            else:
                result = item
        assert result is not None, "a model client always ends with a ModelResult"
        visible, reasoning = visible_filter.finish()
        calls = result.tool_calls
        nudges: tuple[Nudged, ...] = ()
        if not calls:
            parsed, problems = parse_tool_markup(result.text)
            calls = tuple(parsed)
            if problems:
                nudges = (Nudged(turn=self.id, text="; ".join(problems)),)
        self.add_usage(result.usage)
        yield _RoundOutcome(requested, result, visible, reasoning, calls, nudges)

    def add_usage(self, usage: Usage) -> None:
        self.usage = Usage(
            prompt_tokens=self.usage.prompt_tokens + usage.prompt_tokens,
            completion_tokens=self.usage.completion_tokens + usage.completion_tokens,
            cost=self.usage.cost + usage.cost,
        )

    async def _run_tools(self, calls: tuple[ToolCall, ...], surface: ToolSurface) -> None:
        context = ToolContext(partner=self.turn.partner.id, turn=self.turn, surface=surface.tools, services=self.brain.services)
        returned = []
        for call in calls:
            outcome = await self.brain.tools.call(call, context)
            returned.append(
                ToolReturned(turn=self.id, call_id=call.id, name=call.name, text=outcome.text, is_error=outcome.is_error)
            )
        await self.brain.log.append(self.conversation, *returned)

    async def _merge_arrivals(self) -> None:
        arrivals = self.turn.take_arrivals()
        if arrivals:
            self.turn.messages.extend(arrivals)
            await self.brain.log.append(self.conversation, *(self._user(m) for m in arrivals))

    async def _over_budget(self) -> str | None:
        policies = self.persona.policies
        partner, learner = self.turn.partner.id, self.learner
        if policies.daily_token_budget_per_learner is not None:
            if await self.brain.usage.spent_today(partner, learner) >= policies.daily_token_budget_per_learner:
                return say(Phrase.BUDGET_LEARNER, self.language)
        if policies.daily_token_budget_per_partner is not None:
            if await self.brain.usage.spent_today(partner) >= policies.daily_token_budget_per_partner:
                return say(Phrase.BUDGET_PARTNER, self.language)
        return None

    async def _end(self, outcome: str) -> None:
        await self.brain.log.append(self.conversation, TurnEnded(turn=self.id, outcome=outcome))  # type: ignore[arg-type]
        await self.brain.usage.record(self.turn.partner.id, self.learner, self.usage)
