"""A served gateway with two teachers' partners and console users, and a browser-less console client.

Ada teaches on Telegram (``telegram:100``) and owns ``algebra`` and ``geometry``; Ben teaches on
Matrix (``matrix:@ben:school.example``) and owns ``biology``; ``geometry`` is Ada's alone, though
it lists a Matrix account of hers too.  The console users: ``root`` (administrator), ``ada`` and
``ben`` (teachers) and ``gone`` (Ada's account, disabled).  Everything goes over real HTTP to
uvicorn on loopback.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.console.passwords import hash_password
from gateway.core.config import Config
from gateway.core.events import RuntimeEvent, StreamEnd, TurnEnd
from gateway.core.turns import Turn
from gateway.store.console import ConsoleUser, Role
from tests.e2e.rig import served
from tests.waits import HTTP_S

ADA_ID, BEN_ID = "telegram:100", "matrix:@ben:school.example"
PASSWORDS = {"root": "root-pw-quartz-7781", "ada": "ada-pw-marble-4412", "ben": "ben-pw-cobalt-9903",
             "gone": "gone-pw-amber-5520"}
"""Console passwords of the test users (no common words: the leak scanner hunts for these in output)."""
ALL_PARTNERS = ["algebra", "geometry", "biology"]
SEEN = {"root": ALL_PARTNERS, "ada": ["algebra", "geometry"], "ben": ["biology"]}


class Quiet:
    """A responder that answers "ok": the console tests never start a turn, the gateway just needs one."""

    name = "quiet"

    async def respond(self, turn: Turn) -> AsyncIterator[RuntimeEvent]:
        yield StreamEnd(markdown="ok")
        yield TurnEnd()


def console_config(data_dir: Path, **http: Any) -> Config:
    ada = {"channel": "telegram", "user": "100"}
    return parse_config({
        "data_dir": str(data_dir),
        "http": {"host": "127.0.0.1", "port": 0, **http},
        "partners": [
            {"id": "algebra", "name": "Algebra", "owners": [ada]},
            {"id": "geometry", "name": "Geometry", "owners": [{"channel": "matrix", "user": "@ada:school.example"}, ada]},
            {"id": "biology", "name": "Biology", "owners": [{"channel": "matrix", "user": "@ben:school.example"}]},
        ],
    })


def user(username: str, role: Role, teacher: str | None = None, *, disabled: bool = False) -> ConsoleUser:
    return ConsoleUser(username, username.title(), role, teacher, hash_password(PASSWORDS[username]), time.time(), disabled)


@dataclass
class Served:
    url: str
    gateway: Gateway


@contextlib.asynccontextmanager
async def serve_console(data_dir: Path, *, with_users: bool = True, own_brain: bool = False, **http: Any) -> AsyncIterator[Served]:
    """``own_brain``: the gateway builds its real brain (memory, knowledge) instead of the quiet responder."""
    responder = None if own_brain else Quiet()
    async with Gateway(console_config(data_dir, **http), responder=responder) as gateway, served(gateway) as url:
        if with_users:
            for made in (user("root", Role.ADMINISTRATOR), user("ada", Role.TEACHER, ADA_ID),
                         user("ben", Role.TEACHER, BEN_ID), user("gone", Role.TEACHER, ADA_ID, disabled=True)):
                assert await gateway.store.add_console_user(made)
        yield Served(url, gateway)


def client(url: str, **kwargs: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=HTTP_S, trust_env=False, **kwargs)


def hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found, f"no hidden field {name} in the page"
    return found.group(1)


async def sign_in(http: httpx.AsyncClient, username: str, password: str | None = None) -> httpx.Response:
    """Fill and send the sign-in form as a browser would: its page first (for the form token), then the POST."""
    page = await http.get("/console/login")
    return await http.post("/console/login", data={"csrf": hidden(page.text, "csrf"), "username": username,
                                                   "password": PASSWORDS.get(username, "") if password is None else password})


async def signed_in(url: str, username: str) -> httpx.AsyncClient:
    http = client(url)
    response = await sign_in(http, username)
    assert response.status_code == 303 and response.headers["location"] == "/console/", response.text
    return http


async def csrf_of(http: httpx.AsyncClient) -> str:
    """The session's CSRF token, as the signed-in page carries it (in the sign-out form)."""
    return hidden((await http.get("/console/")).text, "csrf")
