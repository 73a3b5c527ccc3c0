"""A long answer: its first part rides in the callback's response, the rest follow it as messages, in order.

The split is the one outbound path's, in bytes (platforms.toml: 2,048 for an
Official Account).  Part 1 may go as a customer-service message only once the
response carrying part 0 has been written (passive.py): otherwise WeChat could
show the learner the second half before the first.
"""

from __future__ import annotations

PARAGRAPH = "光合作用把光能变成化学能。" * 20  # 780 bytes a paragraph: three paragraphs will not fit in 2,048


async def test_the_parts_of_a_long_answer_arrive_in_order_the_first_in_the_callbacks_response(open_rig):
    rig = await open_rig(mode="safe")
    assert rig.responder is not None
    rig.responder.answer = lambda turn: "\n\n".join(f"{n}. {PARAGRAPH}" for n in range(1, 5))
    await rig.oa.say("o-learner", "explain photosynthesis")
    await rig.texts("o-learner", 2)
    await rig.quiet()
    shown = rig.oa.texts_to("o-learner")
    assert len(shown) >= 2 and [m.get("via") for m in rig.oa.sent][0] == "passive"
    assert "".join(shown).index("1. ") < "".join(shown).index("2. ") < "".join(shown).index("4. ")
    assert "".join(shown).count("光合作用") == 4 * 20
