"""The one Outbox: every reply key is made in one module, every writer goes through it, delivery is woken by it."""

from __future__ import annotations

import time

from gateway.configfile import parse_config
from gateway.core.messages import OutboundReply
from gateway.pipeline.outbox import Outbox, part_key, reminder_key, reply_key, stream_key
from gateway.pipeline.routing import Router
from gateway.store import Reminder, ReplyState
from gateway.store.sqlite import SqliteStore
from gateway.takeover import TeacherDesk
from tests.pipeline.memory_channel import make_message


def test_part_stream_and_reminder_keys_are_distinct_and_stable():
    key = reply_key(make_message("q", event="e1").address, "e1")
    assert part_key(key, 0) == part_key(key, 0) != part_key(key, 1)
    assert stream_key(key) not in {part_key(key, i) for i in range(100)}
    assert reminder_key("r1") == reminder_key("r1") != reminder_key("r2")


async def test_a_posted_reply_is_durable_before_delivery_is_woken(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite")
    await store.open()
    outbox = Outbox(store)
    woken: list[tuple[str, str]] = []

    def wake(key, target):
        woken.append((key, target.conversation.chat))

    outbox.on_ready(wake)
    message = make_message("hello", event="e1")
    await store.accept([message], 60)
    key = reply_key(message.address, message.event_id, "greeting")
    seen_in_store = []
    outbox.on_ready(lambda k, _t: seen_in_store.append(k))
    await outbox.post(OutboundReply(idempotency_key=key, target=message.address, markdown="hi"),
                      answered=[message.dedup_key])
    item = await store.get_reply(key)
    assert item is not None and item.state is ReplyState.READY
    assert woken == [(key, "c1")] and seen_in_store == [key]
    assert await store.open_inbound() == []  # answered in the same transaction
    written = await outbox.write(OutboundReply(idempotency_key="quiet", target=message.address, markdown="x"))
    assert written.state is ReplyState.READY and woken == [(key, "c1")]  # write() wakes nobody
    await store.close()


async def test_a_due_reminder_becomes_a_reply_under_its_key_once(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite")
    await store.open()
    outbox = Outbox(store)
    woken: list[str] = []
    outbox.on_ready(lambda key, _target: woken.append(key))
    address = make_message("q", event="e1").address
    await store.add_reminder(Reminder(id="r1", target=address, text="revise", due_at=time.time() - 1))
    assert await outbox.fire_reminders(time.time()) == 1
    assert await outbox.fire_reminders(time.time()) == 0
    assert woken == [reminder_key("r1")]
    item = await store.get_reply(reminder_key("r1"))
    assert item is not None and item.reply.markdown == "revise"
    await store.close()


async def test_the_teacher_desk_needs_no_lanes_only_the_outbox(tmp_path):
    """The cycle lanes -> responder -> teacher desk -> lanes is gone: the desk writes, whoever listens delivers."""
    config = parse_config({
        "data_dir": str(tmp_path),
        "partners": [{"id": "tutor", "name": "Tutor", "owners": [{"channel": "memory", "user": "teacher", "account": "acct"}]}],
        "bindings": [{"partner": "tutor", "channel": "memory", "account": "acct"}],
        "channels": {"memory": {"acct": {}}},
    })
    store = SqliteStore(tmp_path / "db.sqlite")
    await store.open()
    outbox = Outbox(store)
    woken: list[str] = []
    outbox.on_ready(lambda _key, target: woken.append(target.conversation.chat))
    desk = TeacherDesk(store, Router(config.partners, config.bindings), outbox)
    told = await desk.hand_to_teacher(make_message("help", event="e1", chat="kid").address, "needs a human")
    assert "teacher" in told.lower() and woken == ["teacher"]
    [row] = [i for i in await store.open_replies() if i.reply.target.conversation.chat == "teacher"]
    assert "needs a human" in row.reply.markdown
    await store.close()
