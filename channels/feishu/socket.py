"""The long connection: lark-oapi's ``ws.Client`` on a thread of its own, each event handed to the gateway.

Why a thread, and a private copy of the SDK's module: ``lark_oapi.ws.client`` takes an event loop into a
module global when it is imported and runs everything on it, and ``Client.start()`` blocks for good.  So
each account imports its own copy of that module inside its own thread, after giving the thread a new
loop -- two accounts never share a loop, and the gateway's loop is never blocked.

**Ack after durable.**  The SDK calls the handler synchronously and writes the frame's ack (``{"code":
200}``) when it returns, a 500 when it raises.  The handler hands the event to the gateway's loop
(``run_coroutine_threadsafe``) and waits for ``sink.accept`` to finish; a failed accept raises, so Feishu
is answered 500 and delivers the event again.

**One reconnect layer.**  The SDK is built with ``auto_reconnect=False``: a drop ends the connection and
the channel's ``run``, and the supervisor's restart dials again.  The SDK logs at WARNING only: its INFO
lines name the socket URL, which carries the connection's ticket.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from channels.feishu.config import FeishuConfig
from channels.feishu.decode import RECEIVE
from gateway.core.errors import AuthFailed, PeerUnavailable, PlatformError

PLATFORM = "feishu"
ACCEPT_WAIT_S = 60.0
"""How long one event may wait for the gateway to store it before the SDK is told it failed (Feishu retries)."""
log = logging.getLogger(__name__)


def _own_ws_module() -> Any:
    """A fresh copy of ``lark_oapi.ws.client``, whose module-global loop is this thread's."""
    spec = importlib.util.find_spec("lark_oapi.ws.client")
    if spec is None or spec.loader is None:  # pragma: no cover - the extra is checked before this runs
        raise PeerUnavailable(PLATFORM, "lark_oapi.ws.client is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LongConnection:
    """One account's long connection; ``on_event`` runs on the gateway's loop for every message event."""

    def __init__(self, settings: FeishuConfig, on_event: Callable[[dict[str, Any]], Coroutine[Any, Any, None]]) -> None:
        self.settings, self.on_event = settings, on_event
        self.failure: PlatformError | None = None
        self._gateway: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._gateway = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name=f"feishu-ws-{self.settings.app_id}", daemon=True)
        self._thread.start()

    @property
    def connected(self) -> bool:
        return self._client is not None and getattr(self._client, "_conn", None) is not None

    @property
    def ended(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def _run(self) -> None:
        import lark_oapi as lark
        from lark_oapi.ws.exception import ClientException

        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            ws = _own_ws_module()
            handler = lark.EventDispatcherHandler.builder("", "").register_p2_customized_event(RECEIVE, self._handle).build()
            self._client = ws.Client(self.settings.app_id, self.settings.app_secret.get_secret_value(),
                                     event_handler=handler, domain=self.settings.api_base, auto_reconnect=False,
                                     log_level=lark.LogLevel.WARNING)
            self._client.start()
        except ClientException as refused:
            self.failure = AuthFailed(PLATFORM, f"the long connection was refused ({str(refused)[:120]}): "
                                                "check app_id and app_secret, and that the app uses the long connection")
        except RuntimeError:  # the loop was stopped by close(): the normal end
            pass
        except Exception as error:  # whatever ended the SDK's loop is the run's failure
            self.failure = PeerUnavailable(PLATFORM, f"the long connection failed ({type(error).__name__})")
        finally:  # the SDK's tasks end here; the loop stays open for the SDK's finalizers (its cache cancels on it)
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))

    def _handle(self, event: Any) -> None:
        """On the SDK's thread: wait until the gateway has the event durable, or raise (a 500 to Feishu)."""
        import lark_oapi as lark

        raw = json.loads(lark.JSON.marshal(event))
        assert self._gateway is not None
        done: Future[None] = asyncio.run_coroutine_threadsafe(self.on_event(raw), self._gateway)
        done.result(timeout=ACCEPT_WAIT_S)

    async def close(self) -> None:
        loop, client, thread = self._loop, self._client, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        if client is not None:
            try:
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_quiet_disconnect(client), loop))
            except Exception as error:  # closing a dead socket is no news
                log.debug("feishu ws close error=%s", type(error).__name__)
        with contextlib.suppress(RuntimeError):  # already stopped
            loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, 10.0)


async def _quiet_disconnect(client: Any) -> None:
    """On the SDK's loop: end the SDK client's own tasks (its receive and ping loops), then close the socket.

    Closed under a running receive loop, the SDK logs the normal close as an ERROR and leaves that loop's task
    with an exception nobody retrieves, so every stop printed a traceback."""
    here = asyncio.current_task()
    own = [t for t in asyncio.all_tasks() if t is not here and getattr(t.get_coro(), "__qualname__", "").startswith("Client.")]
    for task in own:
        task.cancel()
    await asyncio.gather(*own, return_exceptions=True)
    await client._disconnect()
