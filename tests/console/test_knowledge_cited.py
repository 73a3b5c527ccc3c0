"""End to end: a teacher uploads a document in the console, a learner's answer is built from it, and the
learner then shows up on the teacher's Learners page with that conversation.

Nothing is faked: the gateway builds its real brain, the model is the stub over HTTP
(``tests/peers/model_stub.py``, scripted to call ``knowledge_search``), and the learner speaks through
the web chat's own HTTP API.
"""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import pytest

from gateway.store.console import Role
from tests.console.brain_rig import brain_console
from tests.console.rig import ADA_ID, csrf_of, signed_in, user
from tests.console.test_knowledge import WORKSHEET
from tests.e2e.rig import PARTNER, WebLearner
from tests.peers.model_stub import ModelStub, Reply

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*"), pytest.mark.usefixtures("real_brain")]

QUESTION = "What does the numerator count?"
ANSWER = "It counts the parts you take [1]."
"""Citing the passage by the number the tool gave it, as the tool asks the model to."""


async def test_a_document_uploaded_in_the_console_is_what_the_answer_is_built_from(tmp_path: Path):
    async with ModelStub() as stub:
        async with brain_console(tmp_path / "data", stub.api_base, user("ada", Role.TEACHER, ADA_ID)) as running:
            url = running.url
            async with aclosing(await signed_in(url, "ada")) as ada:
                sent = await ada.post(f"/console/partners/{PARTNER}/knowledge", data={"csrf": await csrf_of(ada)},
                                      files={"file": ("Fractions Worksheet.md", WORKSHEET, "text/markdown")})
                assert sent.status_code == 303, sent.text

                stub.script(Reply.tool_calls(("knowledge_search", {"query": "numerator"})), Reply.text(ANSWER))
                learner = await WebLearner(url).open()
                try:
                    await learner.say(QUESTION)
                    await learner.wait_for(lambda page: page.finished(), what="the final answer")
                    assert learner.finished()[-1].text == ANSWER
                finally:
                    await learner.close()

                # the model was handed the uploaded passage as [1], with the citation the reply's [1] stands for
                [result] = [m["content"] for m in stub.requests[-1]["messages"] if m["role"] == "tool"]
                assert result.startswith("[1] Fractions worksheet — Halves (Fractions Worksheet.md)\n"), result[:200]
                assert "zebrafish" in result.split("\n\n[2]")[0]

                # and the learner is on Ada's Learners page, with this conversation
                [listed] = (await ada.get(f"/console/api/partners/{PARTNER}/learners")).json()["learners"]
                assert listed["identities"] == [f"webchat:default:{learner.learner}"]
                page = (await ada.get(f"/console/partners/{PARTNER}/learners/{listed['id']}")).text
                assert QUESTION in page and ANSWER in page
