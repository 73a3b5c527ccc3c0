"""Terminal chat: the operator talks to a partner on stdin and reads replies on stdout.

It is the smallest complete channel -- one direct conversation, one sender,
replies streamed by printing only what each edit adds -- and what
``partners chat`` runs.  The line source and the writer are injectable so the
same code runs against a script in tests.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
import threading
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable
from datetime import UTC, datetime
from itertools import count

from channels.base import Channel, ChannelContext
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.config import AccountConfig
from gateway.core.messages import (
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    MessageId,
    Referrer,
    RenderedPart,
    Sender,
    SentMessage,
    Text,
    UserId,
)

QUIT = "/quit"
CHAT = ChatId("console")


async def stdin_lines() -> AsyncIterator[str]:
    """Lines typed on stdin, read by a daemon thread so a pending read never blocks exit."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def put(item: str | None) -> None:
        try:
            loop.call_soon_threadsafe(lines.put_nowait, item)
        except RuntimeError:  # the loop closed while a line was being typed
            pass

    def pump() -> None:
        for line in sys.stdin:
            put(line)
        put(None)

    threading.Thread(target=pump, name="console-stdin", daemon=True).start()
    while (line := await lines.get()) is not None:
        yield line


def stdout_write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (some containers)
        return "console"


class ConsoleChannel(Channel[AccountConfig]):
    name = "console"
    config_model = AccountConfig

    def __init__(
        self,
        context: ChannelContext[AccountConfig],
        *,
        lines: Callable[[], AsyncIterable[str]] = stdin_lines,
        write: Callable[[str], None] = stdout_write,
        user: str | None = None,
    ) -> None:
        super().__init__(context)
        self._lines, self._write = lines, write
        self.user = UserId(user or os_user())
        self.finished = asyncio.Event()
        """Set when the operator typed /quit or closed stdin; ``partners chat`` then stops."""
        self.input_ended = False
        """True when stdin closed rather than /quit: ``echo question | partners chat`` still wants its answer,
        so the chat waits for what is pending before it stops."""
        self._ids = count(1)
        self._shown: dict[MessageId, str] = {}
        """What each open preview shows, so an edit prints only what it adds."""
        self._open: MessageId | None = None
        """The message whose line is still open (no newline yet)."""

    def address(self) -> Address:
        conversation = Conversation(chat=CHAT, kind=ConversationKind.DIRECT)
        return Address(channel=ChannelName(self.name), account=self.account, conversation=conversation)

    def inbound(self, text: str) -> InboundMessage:
        return InboundMessage(
            event_id=EventId(uuid.uuid4().hex),
            address=self.address(),
            sender=Sender(user=self.user, display_name=self.user),
            elements=(Text(text=text),),
            received_at=datetime.now(UTC),
            addressed=True,
        )

    async def run(self, heartbeat: Heartbeat) -> None:
        heartbeat.set_state(ChannelState.RUNNING)
        async for raw in self._lines():
            heartbeat.beat()
            text = raw.rstrip("\r\n")
            if text.strip() == QUIT:
                break
            if not text.strip():
                continue
            await self.context.sink.accept([self.inbound(text)])  # durable before the next line is read
            heartbeat.event()
        else:
            self.input_ended = True
        self.finished.set()

    # ------------------------------------------------------------------ output

    def _end_line(self) -> None:
        if self._open is not None:
            self._write("\n")
            self._open = None

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        """Print a part on its own line; a preview's line stays open for the edits that extend it."""
        self._end_line()
        message = MessageId(f"console-{next(self._ids)}")
        self._write(part.text)
        self._open = message
        if not part.final:  # a streamed preview: later edits extend this line (ADR 0004)
            self._shown[message] = part.text
        else:
            self._end_line()
        return SentMessage(message=message)

    async def edit(self, target: Address, message: MessageId, part: RenderedPart, *, final: bool) -> None:
        """Print only what the text gained while its line is open; otherwise print it anew."""
        old = self._shown.get(message)
        if message == self._open and old is not None and part.text.startswith(old):
            self._write(part.text[len(old):])
        else:
            self._end_line()
            self._write(part.text)
            self._open = message
        if final:
            self._shown.pop(message, None)
            self._end_line()
        else:
            self._shown[message] = part.text

    async def close(self) -> None:
        self._end_line()
