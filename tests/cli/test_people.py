"""`partners people list`, `partners conversations list`, and naming a learner by user id or name.

The data dir is filled the way a running gateway fills it -- the memory service
resolves each sender to a person, the session log records each turn -- and the
commands read it with no gateway running.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime

import pytest

from brain.memory.service import MemoryService
from brain.memory.store import MemoryStore
from brain.session_log import AssistantSaid, SessionLog, TurnStarted, UserSaid
from gateway.configfile import load_config
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.turns import Role, Turn

CONFIG = """\
data_dir: data
partners:
  - id: tutor
    name: Tutor
    owners: [{channel: console, user: teacher}]
  - id: coach
    name: Coach
    owners: [{channel: console, user: teacher}]
"""


def turn(config, partner: str, channel: str, user: str, name: str, *, chat: str | None = None) -> Turn:
    kind = ConversationKind.GROUP if chat else ConversationKind.DIRECT
    address = Address(channel=channel, account="default", conversation=Conversation(chat=chat or f"dm-{user}", kind=kind))
    sender = Sender(user=user, display_name=name)
    message = InboundMessage(event_id=f"{user}-1", address=address, sender=sender, elements=(Text(text="hi"),),
                             received_at=datetime.now(UTC))
    return Turn(config.partner(partner), address, sender, Role.LEARNER, [message])


async def talk(log: SessionLog, service: MemoryService, t: Turn, *texts: str, at: str) -> None:
    key = (await service.session(t)).history_key
    when = datetime.fromisoformat(at)
    events = [TurnStarted(turn=f"t-{key}-{at}", partner=t.partner.id, learner=t.sender.user, model="m", system="s", at=when)]
    for number, text in enumerate(texts):
        events += [UserSaid(turn=events[0].turn, event_id=f"{t.sender.user}-{number}", sender=t.sender.display_name,
                            text=text, user=t.sender.user, at=when),
                   AssistantSaid(turn=events[0].turn, text="Answer.", at=when)]
    await log.append(key, *events)


@pytest.fixture
def filled(workdir):
    """Ann on web chat (3 messages to tutor, 1 to coach), linked to her Telegram account; two Sams; a class group."""
    (workdir / "partners.yaml").write_text(CONFIG, encoding="utf-8")
    config = load_config(workdir / "partners.yaml")

    async def fill() -> None:
        store, log = MemoryStore(config.data_dir / "memory.db"), SessionLog(config.data_dir / "brain.db")
        service = MemoryService(store, log)
        await talk(log, service, turn(config, "tutor", "webchat", "ann-web", "Ann"), "a", "b", at="2026-11-30T10:00:00+00:00")
        await talk(log, service, turn(config, "tutor", "telegram", "4242", "Ann"), "c", at="2026-11-30T11:00:00+00:00")
        await talk(log, service, turn(config, "coach", "webchat", "ann-web", "Ann"), "d", at="2026-11-29T09:00:00+00:00")
        await talk(log, service, turn(config, "tutor", "webchat", "sam-1", "Sam"), "e", at="2026-11-28T09:00:00+00:00")
        await talk(log, service, turn(config, "tutor", "telegram", "777", "sam"), "f", at="2026-11-27T09:00:00+00:00")
        await talk(log, service, turn(config, "tutor", "telegram", "777", "sam", chat="-100123"), "g", "h",
                   at="2026-12-01T08:00:00+00:00")
        store.close()
        log.close()

    asyncio.run(fill())
    return config


def link_ann(invoke) -> None:
    linked = invoke("people", "link", "webchat:default:ann-web", "telegram:default:4242", "--partner", "tutor")
    assert linked.exit_code == 0, linked.output


def rows(output: str) -> list[list[str]]:
    """A table's lines split on its column gaps (two spaces or more)."""
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def test_people_list_shows_each_person_with_their_identities_and_messages_per_partner(invoke, filled):
    link_ann(invoke)

    result = invoke("people", "list")

    assert result.exit_code == 0, result.output
    table = rows(result.stdout)
    assert table[0] == ["PERSON", "IDENTITIES", "PARTNER", "CHANNEL", "MESSAGES", "LAST MESSAGE"]
    ann = [row for row in table if row[0] == "Ann"]
    assert ann == [["Ann", "webchat:default:ann-web (Ann), telegram:default:4242 (Ann)", "tutor",
                    "webchat:default, telegram:default", "3", ann[0][5]]]
    after = table[table.index(ann[0]) + 1]
    assert after[:4] == ["coach", "webchat:default", "1", after[3]]  # same person, second partner: no name repeated
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", ann[0][5])
    assert sum(row[0] in ("Sam", "sam") for row in table) == 2


def test_people_list_for_one_partner_leaves_the_others_out(invoke, filled):
    result = invoke("people", "list", "--partner", "coach")

    assert result.exit_code == 0, result.output
    table = rows(result.stdout)
    assert [row[2] for row in table[1:] if len(row) == 6] .count("coach") == 1
    assert "tutor" not in result.stdout


def test_conversations_list_shows_direct_chats_and_groups_newest_first(invoke, filled):
    link_ann(invoke)

    result = invoke("conversations", "list")

    assert result.exit_code == 0, result.output
    table = rows(result.stdout)
    assert table[0] == ["PARTNER", "KIND", "WITH", "CHANNEL", "MESSAGES", "LAST MESSAGE"]
    body = [row[:5] for row in table[1:]]
    assert body == [
        ["tutor", "group", "telegram:default:-100123", "telegram:default", "2"],
        ["tutor", "direct", "Ann", "webchat:default, telegram:default", "3"],
        ["coach", "direct", "Ann", "webchat:default", "1"],
        ["tutor", "direct", "Sam", "webchat:default", "1"],
        ["tutor", "direct", "sam", "telegram:default", "1"],
    ]


def test_lists_of_an_empty_data_dir_say_so_and_create_nothing(invoke, workdir):
    (workdir / "partners.yaml").write_text(CONFIG, encoding="utf-8")

    assert invoke("people", "list").stdout.strip() == "No one has talked to a partner yet."
    assert invoke("conversations", "list").stdout.strip() == "No conversations yet."
    assert not (workdir / "data").exists()


def test_memory_show_takes_a_platform_user_id_or_a_name(invoke, filled):
    by_identity = invoke("memory", "show", "--partner", "tutor", "--learner", "telegram:default:4242")
    by_user_id = invoke("memory", "show", "--partner", "tutor", "--learner", "4242")
    by_name = invoke("memory", "show", "--partner", "tutor", "--learner", "ann")  # names ignore case

    assert by_identity.exit_code == by_user_id.exit_code == 0, by_user_id.output
    assert "telegram:default:4242 (Ann)" in by_user_id.stdout
    assert by_user_id.stdout == by_identity.stdout
    # "ann" is two people until they are linked: the web chat Ann and the Telegram Ann.
    assert by_name.exit_code == 1
    link_ann(invoke)
    linked = invoke("memory", "show", "--partner", "tutor", "--learner", "Ann")
    assert linked.exit_code == 0 and "webchat:default:ann-web (Ann)" in linked.stdout


def test_a_name_two_learners_share_is_an_error_listing_both(invoke, filled):
    result = invoke("memory", "show", "--partner", "tutor", "--learner", "Sam")

    assert result.exit_code == 1
    assert "'Sam' names 2 learners of tutor's teacher" in result.output
    assert "webchat:default:sam-1 (Sam)" in result.output and "telegram:default:777 (sam)" in result.output
    assert "CHANNEL:ACCOUNT:USER" in result.output
    assert "Traceback" not in result.output


def test_people_show_takes_a_name_too(invoke, filled):
    result = invoke("people", "show", "sam-1", "--partner", "tutor")

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "webchat:default:sam-1 (Sam)"
