"""No configured or run-time secret reaches the log, at any level, whichever library wrote the line.

The channel tests run one real turn per channel against the peers the other
suites use (the Bot API emulator in webhook mode, Dovecot with its SMTP
relay, Synapse, the web chat over HTTP with the real brain and the stub
model), with logging set up exactly as ``partners serve --log-level LEVEL``
sets it up, and read what the operator's terminal would show.  At ``debug``
python-telegram-bot logs its API URL (with the bot token) and the
``setWebhook`` parameters (with the webhook secret).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from pydantic import SecretStr

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.channels.telegram.conftest import free_port
from tests.contract.harness import ContractResponder, eventually, harness_class
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply

LEVELS = ["debug", "info", "warning", "error"]
ADMIN_TOKEN = "admin-token-for-redaction-tests"


def leaked(output: str, secrets: dict[str, str]) -> list[str]:
    """The kinds of secret whose value shows in ``output``, as is or percent-encoded (never the values)."""
    return [kind for kind, value in secrets.items() if value in output or quote(value, safe="") in output]


@contextlib.contextmanager
def env(**values: str) -> Any:
    os.environ.update(values)
    try:
        yield
    finally:
        for name in values:
            os.environ.pop(name, None)


def with_admin_token(raw: dict[str, Any], variable: str) -> dict[str, Any]:
    return {**raw, "http": {**raw.get("http", {}), "admin_token": f"env:{variable}"}}


async def one_turn(harness: Any, gateway: Gateway) -> None:
    await harness.attach(gateway)
    said = await harness.say("hello, is anyone there?")
    await eventually(lambda: harness.seen(said.chat), what="the reply at the peer")


# --------------------------------------------------------------------------- one scenario per channel


@contextlib.asynccontextmanager
async def telegram(request: Any, tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    """Webhook mode: the emulator is told the secret by setWebhook, then pushes the update with it."""
    from gateway.http.app import build_app
    from gateway.http.server import serve_http

    harness = harness_class("telegram").create(request)
    await harness.start(tmp_path)
    port, hook, admin = free_port(), f"TG_HOOK_{uuid.uuid4().hex[:6].upper()}", f"ADMIN_{uuid.uuid4().hex[:6].upper()}"
    secrets = {"telegram token": harness.token, "webhook secret": f"hook_{uuid.uuid4().hex}", "admin token": ADMIN_TOKEN}
    with env(**{hook: secrets["webhook secret"], admin: ADMIN_TOKEN}):
        raw = with_admin_token({
            "data_dir": str(tmp_path / "data"),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": "telegram", "account": "main"}],
            "channels": {"telegram": {"main": {
                "token": f"env:{harness.env}", "api_url": harness.api_url, "mode": "webhook",
                "webhook_url": f"http://127.0.0.1:{port}/webhooks/telegram/main", "webhook_secret": f"env:{hook}",
                "access": {"dm": "open"},
            }}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
        }, admin)
        gateway = Gateway(parse_config(raw), responder=ContractResponder())
        await gateway.start()
        server = asyncio.create_task(serve_http(build_app(gateway), "127.0.0.1", port, shutdown_timeout=1))
        try:
            await one_turn(harness, gateway)
            yield secrets
        finally:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server
            await harness.stop()
            await gateway.stop()


@contextlib.asynccontextmanager
async def email(request: Any, tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    harness = harness_class("email").create(request)
    await harness.start(tmp_path)
    admin = f"ADMIN_{uuid.uuid4().hex[:6].upper()}"
    with env(**{admin: ADMIN_TOKEN}):
        config = harness.gateway_config(tmp_path / "data")
        config = config.model_copy(update={"http": parse_config(with_admin_token({}, admin)).http})
        gateway = Gateway(config, responder=ContractResponder())
        await gateway.start()
        try:
            await one_turn(harness, gateway)
            yield {"email password": harness.peer.password, "admin token": ADMIN_TOKEN}
        finally:
            await harness.stop()
            await gateway.stop()


@contextlib.asynccontextmanager
async def matrix(request: Any, tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    """A password login: the access token the homeserver hands out at run time is a secret too."""
    harness = harness_class("matrix").create(request)
    await harness.start(tmp_path)
    password, admin = f"MX_PW_{uuid.uuid4().hex[:6].upper()}", f"ADMIN_{uuid.uuid4().hex[:6].upper()}"
    with env(**{password: harness.bot.password, admin: ADMIN_TOKEN}):
        raw = with_admin_token(harness.raw_config(tmp_path / "data", access_token=None, password=f"env:{password}"), admin)
        gateway = Gateway(parse_config(raw), responder=ContractResponder())
        await gateway.start()
        try:
            await one_turn(harness, gateway)
            channel = gateway.channel("matrix", "main")
            issued = channel._client.access_token  # what the password login was given, seen only by the channel
            assert issued and issued != harness.bot.access_token
            yield {"matrix password": harness.bot.password, "matrix access token from the login": issued,
                   "admin token": ADMIN_TOKEN}
        finally:
            await harness.stop()
            await gateway.stop()


@contextlib.asynccontextmanager
async def webchat(request: Any, tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    """The real brain: litellm carries the model's API key to the stub model."""
    harness = harness_class("webchat").create(request)
    key, admin = f"sk-redaction-{uuid.uuid4().hex}", f"ADMIN_{uuid.uuid4().hex[:6].upper()}"
    previous = os.environ.pop("PARTNERS_RESPONDER", None)  # the gateway must build its real brain
    try:
        async with ModelStub() as stub:
            stub.script(Reply.text("Hello! What shall we study?"))
            with env(**{STUB_KEY_ENV: key, admin: ADMIN_TOKEN}):
                gateway = Gateway(parse_config(with_admin_token(e2e_config(tmp_path / "data", stub.api_base), admin)))
                await gateway.start()
                try:
                    await one_turn(harness, gateway)
                    yield {"model api key": key, "admin token": ADMIN_TOKEN}
                finally:
                    await harness.stop()
                    await gateway.stop()
    finally:
        if previous is not None:
            os.environ["PARTNERS_RESPONDER"] = previous


SCENARIOS: dict[str, Callable[[Any, Path], Any]] = {"telegram": telegram, "email": email, "matrix": matrix, "webchat": webchat}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("channel", sorted(SCENARIOS))
async def test_a_turn_logged_at_any_level_shows_no_secret(channel, level, cli_logging, request, tmp_path):
    written = cli_logging(level)
    async with SCENARIOS[channel](request, tmp_path) as secrets:
        pass
    output = written.getvalue()
    assert not leaked(output, secrets), f"{channel} at {level}: {', '.join(leaked(output, secrets))} in the log"
    if level == "debug":
        assert "DEBUG" in output, "nothing was logged at debug: the capture did not see the gateway's log"


# --------------------------------------------------------------------------- the mechanism, line by line


SECRET = "123456:mechanism-secret-value"


@pytest.fixture
def logged(cli_logging) -> Callable[[], str]:
    """Logging as the CLI sets it up at debug, with one secret registered as the config would register it."""
    from gateway.redaction import register_secret

    register_secret(SecretStr(SECRET), "test secret")
    written = cli_logging("debug")
    return written.getvalue


@pytest.mark.parametrize("level", [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR])
def test_messages_and_their_arguments_are_masked_at_every_level(logged, level):
    log = logging.getLogger("some.library")
    log.log(level, "calling https://api.example/bot" + SECRET + "/getMe")
    log.log(level, "calling %s with %r", f"https://api.example/bot{SECRET}/getMe", {"secret_token": SECRET})
    log.log(level, "percent-encoded: %s", quote(SECRET, safe=""))
    output = logged()
    assert SECRET not in output and quote(SECRET, safe="") not in output
    assert output.count("[redacted]") == 4


def test_exception_text_and_tracebacks_are_masked(logged):
    log = logging.getLogger("some.library")
    try:
        raise RuntimeError(f"connect failed for https://api.example/bot{SECRET}/getUpdates")
    except RuntimeError:
        log.exception("request failed")
        log.exception("again", stack_info=True)
    output = logged()
    assert "RuntimeError: connect failed for https://api.example/bot[redacted]/getUpdates" in output
    assert SECRET not in output


def test_a_logger_with_its_own_handler_added_later_is_masked_too(logged):
    """uvicorn configures its own non-propagating loggers and handlers after the CLI set up logging."""
    stream = io.StringIO()
    own = logging.getLogger("late.library")
    own.propagate = False
    handler = logging.StreamHandler(stream)
    own.addHandler(handler)
    own.setLevel(logging.DEBUG)
    try:
        own.warning("token=%s", SECRET)
    finally:
        own.removeHandler(handler)
        own.propagate = True
    assert stream.getvalue() == "token=[redacted]\n"


def test_a_run_time_secret_is_masked_once_registered(logged):
    from gateway.redaction import register_secret

    issued = f"syt_{uuid.uuid4().hex}"
    register_secret(issued, "matrix access token")
    logging.getLogger("nio").debug("restored session %s", issued)
    assert issued not in logged() and "restored session [redacted]" in logged()


def test_values_too_short_to_mask_are_left_alone(logged):
    from gateway.redaction import register_secret

    register_secret("abc", "short")
    logging.getLogger("x").warning("abc and abcdef stay readable")
    assert "abc and abcdef stay readable" in logged()


def test_masking_survives_traceback_rendering_elsewhere(logged):
    """A formatter other than the CLI's renders the cached, masked exception text."""
    try:
        raise ValueError(SECRET)
    except ValueError:
        record = logging.getLogger("y").makeRecord("y", logging.ERROR, __file__, 1, "boom", None, sys.exc_info())
    assert SECRET not in logging.Formatter().format(record)
    assert "ValueError: [redacted]" in logging.Formatter().format(record)


def test_a_log_line_made_on_the_thread_that_holds_the_registry_does_not_freeze_it():
    """A garbage collection inside the registry's lock can finalise an asyncio transport whose
    ``__del__`` logs; scrubbing that record asks the registry again, on the same thread.  With a plain
    lock that froze the process (the test suite hung in its leak scan).  Run in a thread, so a
    regression fails here instead of hanging the run."""
    import threading

    from gateway.redaction import SecretRegistry

    registry = SecretRegistry()
    registry.register("s3cret-value-for-reentry", "token")
    got: list[object] = []

    def finaliser_logs_while_the_registry_is_busy() -> None:
        with registry._lock:  # what entries() or pattern() holds while it allocates
            got.append(registry.pattern())
            got.append(registry.entries())

    worker = threading.Thread(target=finaliser_logs_while_the_registry_is_busy, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "the registry waited on its own thread"
    assert got and got[0] is not None and got[0].search("s3cret-value-for-reentry")
