"""The Bot API emulator keeps Telegram's rules -- checked with the real python-telegram-bot where it matters.

If the peer were lenient where Telegram is strict (markup, confirmation by
offset, webhook versus polling), the channel's tests would pass against it and
fail against Telegram.
"""

from __future__ import annotations

import uuid

import pytest
from telegram import Bot

from channels.telegram.transport import BotApiError, StatusKeepingRequest
from gateway.core.capabilities import capabilities_of
from gateway.render import render_reply
from tests.channels.telegram.conftest import new_id
from tests.peers.telegram_html import EntityError, parse_html
from tests.peers.telegram_peer import TelegramUsers

RICH = """# Title

Some **bold**, *italic*, ~~strike~~, `code <x>` and a [link](https://e.org/a?b=1&c=2).

> a quote

- item **two**
  1. nested

```python
return x < 3 & True
```

| a | b |
|---|---|
| 1 | 2 |

![diagram](https://e.org/d.png) & "quotes" <tag> 5 > 3 😀
"""


def test_html_is_parsed_into_text_and_entities_with_utf16_offsets():
    text, entities = parse_html('😀 <b>bold <i>both</i></b> &lt;&amp;&#33; <a href="https://x.org/?a=1&amp;b=2">x</a>')
    assert text == "😀 bold both <&! x"
    assert {"type": "bold", "offset": 3, "length": 9} in entities  # the emoji counts two units
    assert {"type": "italic", "offset": 8, "length": 4} in entities
    assert {"type": "text_link", "offset": 17, "length": 1, "url": "https://x.org/?a=1&b=2"} in entities


@pytest.mark.parametrize("markup, complaint", [
    ("<foo>x</foo>", 'Unsupported start tag "foo" at byte offset 0'),
    ("<b>x", 'Can\'t find end tag corresponding to start tag "b"'),
    ("<b><i>x</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
    ("a < b", "Unclosed start tag at byte offset 2"),
    ('<a>x</a>', "Can't find href"),
])
def test_markup_telegram_refuses_is_refused_with_its_words(markup, complaint):
    with pytest.raises(EntityError, match="can't parse entities"):
        parse_html(markup)
    with pytest.raises(EntityError) as refused:
        parse_html(markup)
    assert complaint in str(refused.value)


def test_everything_the_gateway_renders_for_telegram_passes_telegrams_parser():
    parts = render_reply(RICH, capabilities_of("telegram"))
    for part in parts:
        text, _ = parse_html(part)
        assert text.strip()


@pytest.fixture
async def bot(telegram_api):
    token = f"{new_id()}:{uuid.uuid4().hex}"
    users = TelegramUsers(telegram_api, token)
    await users.register()
    bot = Bot(token, base_url=f"{telegram_api}/bot", base_file_url=f"{telegram_api}/file/bot",
              request=StatusKeepingRequest(httpx_kwargs={"trust_env": False}),
              get_updates_request=StatusKeepingRequest(read_timeout=10, httpx_kwargs={"trust_env": False}))
    async with bot:
        yield bot, users
    await users.aclose()


async def test_an_update_comes_again_with_its_id_until_a_later_offset_confirms_it(bot):
    bot, users = bot
    chat = new_id()
    first = await users.say(chat, "one")
    second = await users.say(chat, "two")
    handed = await bot.get_updates(timeout=0)
    again = await bot.get_updates(timeout=0)  # no offset: nothing confirmed, the same updates
    assert [u.update_id for u in handed] == [u.update_id for u in again] == [first["update_id"], second["update_id"]]
    assert handed[0].message.text == "one" and handed[0].message.from_user.is_bot is False
    rest = await bot.get_updates(offset=first["update_id"] + 1, timeout=0)
    assert [u.update_id for u in rest] == [second["update_id"]]
    assert await bot.get_updates(offset=second["update_id"] + 1, timeout=0.2) == ()


async def test_polling_while_a_webhook_is_set_is_a_conflict(bot):
    bot, _ = bot
    await bot.set_webhook("http://127.0.0.1:9/webhooks/telegram/main", secret_token="abc")
    with pytest.raises(BotApiError) as conflict:
        await bot.get_updates(timeout=0)
    assert conflict.value.status == 409
    await bot.delete_webhook()
    assert await bot.get_updates(timeout=0) == ()


async def test_editing_to_the_same_text_is_not_modified(bot):
    bot, users = bot
    chat = new_id()
    await users.say(chat, "hi")
    sent = await bot.send_message(chat, "<b>answer</b>", parse_mode="HTML")
    assert sent.text == "answer" and sent.entities[0].type == "bold"
    with pytest.raises(BotApiError) as refused:
        await bot.edit_message_text("<b>answer</b>", chat_id=chat, message_id=sent.message_id, parse_mode="HTML")
    assert refused.value.status == 400
    assert refused.value.description.startswith("Bad Request: message is not modified")
