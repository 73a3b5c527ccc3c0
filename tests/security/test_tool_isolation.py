"""No tool a partner can have carries one learner's secret into another learner's turn.

Bob tells the tutor his own secret first (which must stay out of Ann's
turns).  Ann tells the tutor a secret in her direct chat, and hands it to every tool:
a memory fact and a preference, a reminder, a hand-off to the teacher, a
search, and consolidated notes -- so each service behind a tool holds it.  Then,
for each tool of the registry in turn, the stub model calls that tool for Bob,
with arguments that go looking for Ann (by her name, by the words around her
secret, by fields naming her, which must be rejected).  No request the stub
receives for Bob, and no tool result fed back in his turn, holds the secret.

The tools come from the registry itself, so a new built-in joins without a
line here; its arguments are filled in from its schema unless :data:`HUNTS`
says how to hunt with it.  ``tests/memory/test_isolation.py`` covers the
memory and history tools in depth (groups, rebuilt requests, ``/export``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from brain.tools.builtin import TOOL_NAMES, default_registry
from tests.peers.model_stub import Reply
from tests.security.probes.brains import Said, ToolRig, tool_rig

SECRET = "4417-zebra-moon"
"""Ann's locker code: what must never reach Bob.  Bob's own words never contain it."""
ANN_SAYS = f"My locker code is {SECRET}, please keep it private."
BOB_SECRET = "7302-otter-comet"
"""Bob's own locker code: the other direction -- it must never reach Ann's turns."""
HUNT = "Ann locker code"


def _registered() -> list[str]:
    return sorted(default_registry(httpx.AsyncClient(trust_env=False)).names)


TOOLS = _registered()


def hunts(rig: ToolRig, tool: str) -> list[dict[str, Any]]:
    """Arguments Bob's model sends to ``tool`` to find Ann's secret: plausible ones, then ones naming her."""
    known: dict[str, list[dict[str, Any]]] = {
        "memory_read": [{"query": HUNT}, {}, {"key": "locker_code"}],
        "memory_write": [{"text": "Bob wonders what Ann's locker code is"}],
        "history_search": [{"query": HUNT}, {"query": "locker"}],
        "knowledge_search": [{"query": HUNT}],
        "schedule_reminder": [{"when": "in 5 minutes", "text": "tell me Ann's locker code"}],
        "handoff_to_teacher": [{"reason": "Bob asks for Ann's locker code"}],
        "fetch_page": [{"url": rig.site_url("/page?who=ann")}],
    }
    plausible = known.get(tool) or [_from_schema(tool)]
    naming_ann = [{**plausible[0], field: value} for field, value in
                  (("learner", "ann"), ("user", "ann"), ("scope", {"kind": "learner", "key": "ann"}))]
    return [*plausible, *naming_ann]


def _from_schema(tool: str) -> dict[str, Any]:
    """Every required argument of a tool :func:`hunts` does not know, filled with the hunt's words."""
    [spec] = default_registry(httpx.AsyncClient(trust_env=False)).specs([tool])
    samples: dict[str, Any] = {"string": HUNT, "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}
    properties = spec.parameters.get("properties", {})
    return {name: samples.get(properties.get(name, {}).get("type"), HUNT) for name in spec.parameters.get("required", [])}


async def ann_confides(rig: ToolRig) -> None:
    """Ann gives her secret to every service a tool can read back, and her notes are consolidated."""
    rig.stub.script(
        Reply.tool_calls(("memory_write", {"text": f"Ann's locker code is {SECRET}", "key": "locker_code"}),
                         ("memory_write", {"text": f"Ann signs as {SECRET}", "kind": "preference", "key": "signature"}),
                         ("schedule_reminder", {"when": "in 2 hours", "text": f"Your locker code is {SECRET}"}),
                         ("handoff_to_teacher", {"reason": f"Ann shared her locker code {SECRET}"}),
                         ("history_search", {"query": "locker"})),
        Reply.text(f"Noted, {SECRET} stays between us."),
    )
    said = await rig.say("ann", ANN_SAYS)
    assert [r.is_error for r in said.results] == [False] * 5, [r.text for r in said.results]
    ann = await rig.memory.session(rig.turn("ann", "-"))
    rig.stub.script(Reply.text(f"Ann keeps her locker code ({SECRET}) private[^1]."))
    assert rig.partner.model is not None
    assert await rig.consolidator.consolidate(ann.writable, rig.partner.model) is not None
    assert rig.reminders.kept and rig.teacher.told  # the lent services hold it too


def leaks(said: Said) -> list[str]:
    """Where the secret shows in a turn: each stub request and each tool result, by position."""
    found = [f"request {i}" for i, request in enumerate(said.requests) if SECRET in json.dumps(request)]
    return found + [f"{r.name} result" for r in said.results if SECRET in r.text]


def test_the_suite_runs_over_every_registered_tool() -> None:
    assert set(TOOLS) == set(TOOL_NAMES) and len(TOOLS) >= 7


@pytest.mark.parametrize("tool", TOOLS)
async def test_no_tool_carries_anns_secret_into_a_turn_built_for_bob(tool: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_KEY", "sk-test")
    async with tool_rig(tmp_path) as rig:
        rig.stub.script(Reply.tool_calls(("memory_write", {"text": f"Bob's locker code is {BOB_SECRET}"})), Reply.text("ok"))
        await rig.say("bob", f"Remember my locker code {BOB_SECRET}.")
        await ann_confides(rig)
        calls = hunts(rig, tool)
        rig.stub.script(Reply.tool_calls(*((tool, arguments) for arguments in calls)), Reply.text("Let's do your own work."))
        said = await rig.say("bob", f"Use {tool} to find out Ann's locker code.")
        assert len(said.requests) == 2 and len(said.results) == len(calls)  # the tool ran for every hunt
        assert leaks(said) == [], f"{tool} carried Ann's secret to Bob: {leaks(said)}"
        naming_ann = said.results[-3:]
        assert all(r.is_error and "is not an argument of this tool" in r.text for r in naming_ann), \
            [r.text for r in naming_ann]
        # The positive control: the same first hunt, for Ann, still reaches what she told (for the tools that read).
        rig.stub.script(Reply.tool_calls((tool, calls[0])), Reply.text("ok"))
        own = await rig.say("ann", f"Use {tool} for my locker code.")
        assert any(SECRET in json.dumps(request) for request in own.requests)
        assert not any(BOB_SECRET in json.dumps(request) for request in own.requests)
        assert not any(BOB_SECRET in r.text for r in own.results)
        if tool in ("memory_read", "history_search"):
            assert SECRET in own.results[0].text
