"""The console's conversations: the viewer's partners' conversations, each as a live transcript, and takeovers.

=================================================  ======  ===============================================
route                                              method  viewer -> answer
=================================================  ======  ===============================================
``/console/conversations``                         GET     the list (only conversations of partners in sight)
``/console/conversations/{ref}``                   GET     the transcript; not theirs or unknown 404
``/console/conversations/{ref}/takeover``          POST    take it over; 303 back to the transcript
``/console/conversations/{ref}/reply``             POST    answer as the teacher (``text``, ``request``)
``/console/conversations/{ref}/handback``          POST    hand it back (``request``)
``/console/api/conversations[/{ref}[/...]]``       both    the JSON twins of the above
=================================================  ======  ===============================================

``ref`` is the conversation key (``channel:account:chat[/thread]``) in URL-safe base64.  A conversation
belongs to the partner the router binds its address to; :class:`Viewer` decides whether that partner is in
sight, and one that is not answers 404 like one that does not exist.  Everything is read from the store
(:mod:`gateway.store.transcripts`); taking over, answering and handing back call the same
:class:`gateway.takeover.TeacherDesk` methods the ``/reply`` and ``/handback`` chat commands call, so the
learner gets the same messages (the hand-back phrase included) under the same kind of keys.  Each form
carries a ``request`` id made when the page was drawn: sent twice, it answers once.

Live updates: the pages load one committed script (``static/conversations.js``) that polls the JSON twin
and redraws the list or the transcript; the CSP of these pages alone is relaxed to ``script-src 'self'``
and ``connect-src 'self'``.  Polling, not server-sent events: a held-open stream would keep the HTTP
server's shutdown waiting, and the store is where a transcript changes anyway.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.console.access import Viewer
from gateway.console.openapi import Operation, describe
from gateway.console.services import ConsoleGateway
from gateway.console.signin import read_form
from gateway.core.capabilities import Dialect
from gateway.core.config import PartnerConfig
from gateway.core.messages import Address, ReplyAuthor
from gateway.http.responses import error_response
from gateway.render import render_markdown
from gateway.store import InboundState, ReplyState, Takeover
from gateway.store.console import ConsoleSession
from gateway.store.transcripts import ConversationActivity, Heard, Said

if TYPE_CHECKING:  # pages imports the areas
    from gateway.console.pages import Console

log = logging.getLogger(__name__)

ACTIONS = ("takeover", "reply", "handback")
LISTED = 500
"""The most recent conversations looked at for a list (then filtered to the viewer's partners)."""
LINES = 200
"""The last messages heard and replies said that a transcript shows."""
MAX_TEXT = 4000
"""A teacher's answer, in characters; the outbound path splits it in each platform's own unit."""
REQUEST = re.compile(r"[A-Za-z0-9_-]{8,64}")
STATE_WORDS = {"taken_over": "state_taken_over", "waiting_approval": "state_waiting_approval",
               "answering": "state_answering", "answered": "state_answered"}
LINE_WORDS = {"pending": "line_pending", "held": "line_held", "dropped": "line_dropped", "streaming": "line_streaming",
              "failed": "line_failed"}
"""The states a transcript line says aloud (answered and delivered ones say nothing)."""
DONE_WORDS = {"takeover": "done_takeover", "reply": "done_reply", "handback": "done_handback"}
SCRIPT_CSP = "; script-src 'self'; connect-src 'self'"
"""Added to the console's CSP on these pages only: their one script, and the JSON twin it polls."""


class ConversationState(str, Enum):
    TAKEN_OVER = "taken_over"  # the teacher answers here; the partner is quiet
    WAITING_APPROVAL = "waiting_approval"  # held until the learner's pairing code is approved
    ANSWERING = "answering"  # a message waits for its turn, or the answer is being written
    ANSWERED = "answered"  # nothing waits


class ConversationSummary(BaseModel):
    """One conversation as the list shows it."""

    ref: str
    partner: str
    partner_name: str
    channel: str
    account: str
    learner: str
    """The last sender's name (their platform id when they have none)."""
    last_text: str
    last_at: float
    state: ConversationState
    takeover: str | None
    """The open case's code, when taken over."""


class Line(BaseModel):
    """One message of a transcript: heard from someone, or said by the gateway (partner or teacher)."""

    heard: bool
    who: str
    author: ReplyAuthor | None = None
    """Whose words a reply carries (the page names a teacher's and the gateway's apart); None when heard."""
    text: str
    at: float
    state: str
    """The inbox state (``pending``, ``answered``, ``held``, ``dropped``) or the reply's (``streaming``...)."""


class Transcript(BaseModel):
    conversation: ConversationSummary
    lines: list[Line]


class ConversationList(BaseModel):
    conversations: list[ConversationSummary]


class Done(BaseModel):
    done: str
    """The action carried out: ``takeover``, ``reply`` or ``handback``."""


class ReplyForm(BaseModel):
    text: str
    """The teacher's answer, 1 to :data:`MAX_TEXT` characters."""
    request: str
    """A unique id of 8 to 64 letters, digits, ``-`` or ``_``: the same one sends once."""


class HandbackForm(BaseModel):
    request: str


FORMS: dict[str, type[BaseModel] | None] = {"takeover": None, "reply": ReplyForm, "handback": HandbackForm}


def ref_of(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def key_of(ref: str) -> str | None:
    if not 0 < len(ref) <= 600:
        return None
    try:
        return base64.urlsafe_b64decode(ref + "=" * (-len(ref) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _state(activity: ConversationActivity, takeover: Takeover | None) -> ConversationState:
    if takeover is not None:
        return ConversationState.TAKEN_OVER
    if activity.held:
        return ConversationState.WAITING_APPROVAL
    if activity.pending or (activity.last_said is not None and activity.last_said.state is ReplyState.STREAMING):
        return ConversationState.ANSWERING
    return ConversationState.ANSWERED


def _summary(activity: ConversationActivity, partner: PartnerConfig, takeover: Takeover | None) -> ConversationSummary:
    heard, said = activity.last_heard, activity.last_said
    address = heard.message.address
    last_text, last_at = ((render_markdown(said.reply.markdown, Dialect.PLAIN), said.at) if said is not None and said.at >= heard.at
                          else (heard.message.text, heard.at))
    return ConversationSummary(
        ref=ref_of(activity.key), partner=partner.id, partner_name=partner.name, channel=address.channel,
        account=address.account, learner=heard.message.sender.display_name or heard.message.sender.user,
        last_text=last_text, last_at=last_at, state=_state(activity, takeover),
        takeover=takeover.code if takeover is not None else None)


def _line(entry: Heard | Said, partner: PartnerConfig) -> Line:
    if isinstance(entry, Heard):
        sender = entry.message.sender
        return Line(heard=True, who=sender.display_name or sender.user, text=entry.message.text, at=entry.at,
                    state=entry.state.value)
    # What the learner read, not the Markdown the model wrote: ``**4**`` shows as 4.
    text = render_markdown(entry.reply.markdown, Dialect.PLAIN)
    return Line(heard=False, who=partner.name, author=entry.reply.author, text=text, at=entry.at,
                state=entry.state.value)


@dataclass(frozen=True)
class Opened:
    """A conversation the viewer may see, as one request found it."""

    address: Address
    partner: PartnerConfig
    transcript: Transcript
    last_heard: Heard


def scripted(response: Response) -> Response:
    response.headers["Content-Security-Policy"] += SCRIPT_CSP
    return response


class Conversations:
    """The area's endpoints over the console and the running gateway."""

    def __init__(self, console: Console) -> None:
        self.console = console

    @property
    def gateway(self) -> ConsoleGateway:
        assert self.console.gateway is not None, "the conversations area needs the running gateway"
        return self.console.gateway

    async def _listed(self, viewer: Viewer) -> list[ConversationSummary]:
        takeovers = {t.target.conversation_key: t for t in await self.gateway.store.takeovers()}
        found = []
        for activity in await self.gateway.store.conversations(LISTED):
            partner = self.gateway.router.route(activity.last_heard.message.address)
            if partner is not None and viewer.sees(partner):
                found.append(_summary(activity, partner, takeovers.get(activity.key)))
        return found

    async def _opened(self, request: Request, viewer: Viewer) -> Opened | None:
        """The conversation ``{ref}`` names, if the viewer sees its partner; None for not theirs *and* not there."""
        key = key_of(request.path_params["ref"])
        entries = await self.gateway.store.transcript(key, LINES) if key else []
        heard = [entry for entry in entries if isinstance(entry, Heard)]
        if not heard:
            return None
        address = heard[-1].message.address
        partner = self.gateway.router.route(address)
        if partner is None or not viewer.sees(partner):
            return None
        assert key is not None
        takeover = await self.gateway.store.takeover_of(key)
        said = [entry for entry in entries if isinstance(entry, Said)]
        activity = ConversationActivity(key, heard[-1], said[-1] if said else None,
                                        sum(entry.state is InboundState.PENDING for entry in heard),
                                        sum(entry.state is InboundState.HELD for entry in heard))
        transcript = Transcript(conversation=_summary(activity, partner, takeover),
                                lines=[_line(entry, partner) for entry in entries])
        return Opened(address, partner, transcript, heard[-1])

    # ------------------------------------------------------------------ reading

    async def page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return scripted(self.console.render(request, "conversations.html", viewer=viewer, csrf=session.csrf,
                                            conversations=await self._listed(viewer), states=STATE_WORDS))

    async def api_list(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return JSONResponse(ConversationList(conversations=await self._listed(viewer)).model_dump(mode="json"))

    async def transcript(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        opened = await self._opened(request, viewer)
        if opened is None:
            return self.console.render(request, "message.html", 404, viewer=viewer, csrf=session.csrf,
                                       message="no_conversation")
        done = request.query_params.get("done")
        return scripted(self.console.render(request, "transcript.html", viewer=viewer, csrf=session.csrf,
                                            transcript=opened.transcript, request_id=uuid.uuid4().hex,
                                            notice=DONE_WORDS.get(done or ""), states=STATE_WORDS, line_states=LINE_WORDS,
                                            max_text=MAX_TEXT))

    async def api_transcript(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        opened = await self._opened(request, viewer)
        if opened is None:
            return error_response(404, "no such conversation")
        return JSONResponse(opened.transcript.model_dump(mode="json"))

    # ------------------------------------------------------------------ the takeover

    def act(self, action: str, *, api: bool) -> Callable[[Request, Viewer, ConsoleSession], Awaitable[Response]]:
        async def endpoint(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
            opened = await self._opened(request, viewer)
            if opened is None:
                return error_response(404, "no such conversation")
            form = await read_form(request) or {}
            problem = await self._do(action, opened, viewer, form)
            if problem is not None:
                return error_response(problem[0], problem[1])
            if api:
                return JSONResponse(Done(done=action).model_dump())
            ref = request.path_params["ref"]
            return RedirectResponse(f"/console/conversations/{ref}?done={action}", status_code=303,
                                    headers={"Cache-Control": "no-store"})

        return endpoint

    async def _do(self, action: str, opened: Opened, viewer: Viewer, form: dict[str, str]) -> tuple[int, str] | None:
        """Carry out ``action``; the status and message of why not, or None when done."""
        desk, key = self.gateway.teacher, opened.address.conversation_key
        if action == "takeover":
            takeover = await desk.take_over(opened.partner, opened.address, f"taken over in the console by {viewer.username}",
                                            opened.last_heard.message.sender.locale)
            log.info("console takeover user=%s conversation=%s code=%s", viewer.username, key, takeover.code)
            return None
        request_id = form.get("request", "")
        if not REQUEST.fullmatch(request_id):
            return 400, "send the form's request id (8 to 64 letters, digits, - or _)"
        running = await self.gateway.store.takeover_of(key)
        if running is None:
            return 409, "this conversation is not taken over: take it over first"
        if action == "reply":
            text = form.get("text", "").strip()
            if not text or len(text) > MAX_TEXT:
                return 400, f"write an answer of 1 to {MAX_TEXT} characters"
            await desk.answer_as_teacher(running, text, f"console:{request_id}")
            log.info("console teacher answer user=%s conversation=%s code=%s", viewer.username, key, running.code)
            return None
        await desk.hand_back(running, f"console:{request_id}")
        log.info("console hand-back user=%s conversation=%s code=%s", viewer.username, key, running.code)
        return None


def routes(console: Console) -> list[BaseRoute]:
    area = Conversations(console)
    guarded = console.guarded
    routes: list[BaseRoute] = [
        Route("/conversations", guarded(area.page, api=False)),
        Route("/conversations/{ref}", guarded(area.transcript, api=False)),
        Route("/api/conversations", describe(guarded(area.api_list, api=True),
                                             get=Operation("The latest conversations of the partners in sight",
                                                           answers=ConversationList))),
        Route("/api/conversations/{ref}", describe(guarded(area.api_transcript, api=True),
                                                   get=Operation("A conversation's transcript", answers=Transcript))),
    ]
    for action in ACTIONS:
        routes.append(Route(f"/conversations/{{ref}}/{action}", guarded(area.act(action, api=False), api=False), methods=["POST"]))
        routes.append(Route(f"/api/conversations/{{ref}}/{action}", describe(
            guarded(area.act(action, api=True), api=True),
            post=Operation(f"The conversation's {action}", answers=Done, form=FORMS[action])), methods=["POST"]))
    return routes
