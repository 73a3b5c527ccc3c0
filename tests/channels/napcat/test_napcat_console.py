"""The console's channels page says the ban risk plainly next to a NapCat account."""

from __future__ import annotations

import os
import uuid
from contextlib import aclosing
from typing import Any

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.store.console import Role
from tests.channels.napcat.conftest import account_settings
from tests.console.rig import Quiet, console_config, signed_in, user
from tests.e2e.rig import served
from tests.peers.napcat_server import NapcatServer


async def test_the_channels_page_warns_of_the_ban_risk_on_a_napcat_row(tmp_path, token_env):
    async with NapcatServer(token=uuid.uuid4().hex) as napcat:
        os.environ[token_env] = napcat.token
        raw: dict[str, Any] = console_config(tmp_path / "data").model_dump(mode="json", exclude={"source"})
        raw["channels"] = {"napcat": {"qq": account_settings(napcat, token_env)}}
        raw["bindings"] = [{"partner": "algebra", "channel": "napcat", "account": "qq"}]
        async with Gateway(parse_config(raw), responder=Quiet()) as gateway, served(gateway) as url:
            assert await gateway.store.add_console_user(user("root", Role.ADMINISTRATOR))
            async with aclosing(await signed_in(url, "root")) as http:
                page = (await http.get("/console/channels")).text
    assert 'data-account="napcat:qq"' in page
    assert 'class="error ban-risk"' in page and "ban" in page and "QQ" in page
