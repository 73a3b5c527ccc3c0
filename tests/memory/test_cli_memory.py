"""``partners memory`` and ``partners people`` against a data dir the memory service filled."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from brain.memory.service import MemoryService
from brain.memory.store import MemoryStore
from brain.session_log import AssistantSaid, SessionLog, TurnStarted, UserSaid
from brain.tools.services import MemoryEntry
from gateway.cli import cli
from gateway.configfile import load_config
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.turns import Role, Turn

CONFIG = """\
data_dir: data
partners:
  - id: tutor
    name: Tutor
    owners: [{channel: console, user: teacher}]
"""


def learner_turn(config, user: str, channel: str = "webchat") -> Turn:
    address = Address(channel=channel, account="default", conversation=Conversation(chat=f"dm-{user}", kind=ConversationKind.DIRECT))
    sender = Sender(user=user, display_name=user.title())
    message = InboundMessage(event_id=f"{user}-1", address=address, sender=sender, elements=(Text(text="hi"),),
                             received_at=datetime.now(UTC))
    return Turn(config.partner("tutor"), address, sender, Role.LEARNER, [message])


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A config, and Ann known to the tutor: one fact, one message each way in her history."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARTNERS_CONFIG", raising=False)
    (tmp_path / "partners.yaml").write_text(CONFIG)
    config = load_config(tmp_path / "partners.yaml")

    async def fill() -> None:
        store, log = MemoryStore(config.data_dir / "memory.db"), SessionLog(config.data_dir / "brain.db")
        service = MemoryService(store, log)
        turn = learner_turn(config, "ann")
        await service.write(turn, MemoryEntry("Ann's exam is on Friday", key="exam"))
        key = (await service.session(turn)).history_key
        await log.append(key, TurnStarted(turn="t1", partner="tutor", learner="ann", model="m", system="s"),
                         UserSaid(turn="t1", event_id="ann-1", sender="Ann", text="my exam is on Friday", user="ann"),
                         AssistantSaid(turn="t1", text="Good luck!"))
        await service.session(learner_turn(config, "ann2", "console"))
        store.close()
        log.close()

    asyncio.run(fill())
    runner = CliRunner()
    return lambda *args, **kw: runner.invoke(cli, list(args), prog_name="partners", **kw)


def test_show_export_edit_and_delete_a_learners_memory(setup, tmp_path):
    invoke = setup
    shown = invoke("memory", "show", "--partner", "tutor", "--learner", "webchat:default:ann")
    assert shown.exit_code == 0, shown.output
    assert "Ann's exam is on Friday (in webchat:default:dm-ann, message ann-1)" in shown.output
    assert "Ann: my exam is on Friday" in shown.output and "Tutor: Good luck!" in shown.output

    exported = invoke("memory", "export", "--partner", "tutor", "--learner", "webchat:default:ann", "-o", "ann.json")
    assert exported.exit_code == 0, exported.output
    data = json.loads((tmp_path / "ann.json").read_text())
    assert [f["text"] for f in data["facts"]] == ["Ann's exam is on Friday"]
    [history] = data["history"].values()
    assert [e["kind"] for e in history] == ["turn_started", "user", "assistant"]

    (tmp_path / "notes.md").write_text("Ann is working towards Friday's exam.")
    edited = invoke("memory", "edit", "--partner", "tutor", "--learner", "webchat:default:ann", "--file", "notes.md")
    assert edited.exit_code == 0 and "Notes replaced" in edited.output
    assert "## Notes\nAnn is working towards Friday's exam." in invoke(
        "memory", "show", "--partner", "tutor", "--learner", "webchat:default:ann", "--no-history").output

    (tmp_path / "partner-notes.md").write_text("The class is on chapter 4.")
    assert invoke("memory", "edit", "--partner", "tutor", "--notes", "--file", "partner-notes.md").exit_code == 0
    assert "The class is on chapter 4." in invoke("memory", "show", "--partner", "tutor", "--notes").output

    deleted = invoke("memory", "delete", "--partner", "tutor", "--learner", "webchat:default:ann", "--yes")
    assert deleted.exit_code == 0 and "1 facts" in deleted.output and "3 history events" in deleted.output
    assert "Nothing is remembered here." in invoke("memory", "show", "--partner", "tutor", "--learner", "webchat:default:ann").output


def test_people_link_show_unlink_and_forget(setup):
    invoke = setup
    linked = invoke("people", "link", "webchat:default:ann", "console:default:ann2", "--partner", "tutor")
    assert linked.exit_code == 0 and "Linked console:default:ann2 to webchat:default:ann." in linked.output
    shown = invoke("people", "show", "console:default:ann2", "--partner", "tutor")
    assert shown.output.splitlines() == ["webchat:default:ann (Ann)", "console:default:ann2 (Ann2)"]
    # Through the linked identity, the teacher sees Ann's memory.
    assert "Ann's exam is on Friday" in invoke("memory", "show", "--partner", "tutor", "--learner", "console:default:ann2").output

    assert invoke("people", "unlink", "console:default:ann2", "--partner", "tutor").exit_code == 0
    again = invoke("people", "unlink", "console:default:ann2", "--partner", "tutor")
    assert again.exit_code == 1 and "not linked" in again.output

    forgotten = invoke("people", "forget", "webchat:default:ann", "--partner", "tutor", "--yes")
    assert forgotten.exit_code == 0 and "1 facts" in forgotten.output and "3 history events" in forgotten.output
    gone = invoke("memory", "show", "--partner", "tutor", "--learner", "webchat:default:ann")
    assert gone.exit_code == 1 and "has not written to tutor" in gone.output


def test_bad_names_are_clear_errors(setup):
    invoke = setup
    none = invoke("memory", "show", "--partner", "tutor")
    assert none.exit_code == 2 and "exactly one of --learner, --group, --notes or --owner" in none.output
    bad = invoke("memory", "show", "--partner", "tutor", "--learner", "nobody")
    assert bad.exit_code == 1 and "nobody has not written to tutor" in bad.output
    unknown = invoke("memory", "show", "--partner", "nobody", "--owner")
    assert unknown.exit_code == 2 and "no partner 'nobody'" in unknown.output
    assert invoke("people", "link", "webchat:default:ann", "webchat:default:ann", "--partner", "tutor").output.endswith(
        "were already linked.\n")


def test_commands_that_rewrite_a_learner_refuse_while_a_gateway_runs(setup, tmp_path):
    from gateway import datadir

    invoke = setup
    fd = datadir.hold_shared(load_config(tmp_path / "partners.yaml").data_dir)  # what a running gateway holds
    try:
        refused = invoke("people", "forget", "webchat:default:ann", "--partner", "tutor", "--yes")
        assert refused.exit_code == 1 and "a gateway is running" in refused.output
        shown = invoke("memory", "show", "--partner", "tutor", "--learner", "webchat:default:ann")
        assert shown.exit_code == 0  # reading is fine while it runs
    finally:
        datadir.release(fd)
    done = invoke("people", "forget", "webchat:default:ann", "--partner", "tutor", "--yes")
    assert done.exit_code == 0, done.output


def test_people_forget_erases_the_files_the_learner_sent(setup, tmp_path):
    """Offline, the command lends the gateway's store and blob folder to the controls, as a running gateway does."""
    from gateway.blobs import LocalBlobs
    from gateway.core.messages import Media, MediaRef
    from gateway.store.sqlite import SqliteStore

    config = load_config(tmp_path / "partners.yaml")
    blobs = LocalBlobs(config.data_dir / "blobs")

    async def received() -> str:
        async def body():
            yield b"ann's homework photo"

        blob = await blobs.put(body(), limit=100, suffix=".jpg")
        message = learner_turn(config, "ann").messages[0]
        media = Media.inbound("image", MediaRef(locator="photo-1")).model_copy(update={"blob": blob.key})
        store = SqliteStore(config.database_path)
        await store.open()
        await store.accept([message.model_copy(update={"elements": (media,)})], 60)
        await store.close()
        return blob.key

    key = asyncio.run(received())
    assert blobs.path(key).exists()
    invoke = setup
    done = invoke("people", "forget", "webchat:default:ann", "--partner", "tutor", "--yes")
    assert done.exit_code == 0 and "1 files" in done.output, done.output
    assert not blobs.path(key).exists()
