"""The file's partners and the store's channel accounts, edited in one console, stay one routing table.

A partner edited in the file is applied live (ADR 0039) while a channel account made in the console
lives in the store (ADR 0040): applying the file must keep that account's binding, and a partner
such an account answers as cannot be deleted from under it.
"""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import yaml

from tests.channels.telegram.conftest import new_id
from tests.console.partners_rig import serve_file, write_config
from tests.console.rig import csrf_of, signed_in
from tests.console.test_channel_accounts import add_form, key, new_token, until_running  # noqa: F401 (the key fixture)
from tests.contract.harness import eventually
from tests.peers.telegram_peer import TelegramUsers


async def test_a_partner_edit_keeps_the_console_accounts_binding_and_its_partner_is_not_deleted_from_under_it(
        telegram_api, tmp_path: Path, key):  # noqa: F811
    token = new_token()
    users = TelegramUsers(telegram_api, token)
    await users.register(username="algebra_cobalt_bot")
    path = write_config(tmp_path)
    async with serve_file(path) as running, aclosing(await signed_in(running.url, "ada")) as ada:
        assert (await add_form(ada, telegram_api, token)).status_code == 303
        await until_running(ada, "telegram:main")
        headers = {"x-csrf-token": await csrf_of(ada)}

        settings = (await ada.get("/console/api/partners/algebra/settings")).json()
        renamed = await ada.put("/console/api/partners/algebra", headers=headers,
                                json={"partner": {**settings["partner"], "name": "Algebra II"}, "version": settings["version"]})
        assert renamed.status_code == 200, renamed.text

        chat = new_id()
        await users.say(chat, "still there?")

        async def answered():
            return [m for m in (await users.seen()).get(str(chat), []) if m["text"] == "ok"]

        assert await eventually(answered, what="the answer on the console-made account after a partner edit")

        version = renamed.json()["version"]
        refused = await ada.delete(f"/console/api/partners/algebra?version={version}", headers=headers)
        assert refused.status_code == 409 and "telegram/main" in refused.json()["error"]
        assert "algebra" in [p["id"] for p in yaml.safe_load(path.read_text(encoding="utf-8"))["partners"]]
    await users.aclose()
