"""PassiveSlots: an answer goes either in the callback's response or as a message, never both."""

from __future__ import annotations

import asyncio

from channels.weixin.passive import PassiveSlots


async def test_an_offer_to_a_waiting_callback_is_its_answer_and_is_remembered_for_retries():
    slots = PassiveSlots()
    slot = slots.open("m1")
    assert slot is not None and slots.open("m1") is None  # a retry while the first waits gets no slot of its own
    waiting = asyncio.create_task(slots.wait("m1", slot, 60))
    await asyncio.sleep(0)
    assert slots.offer("m1", "the answer")
    assert await waiting == "the answer"
    assert slots.given("m1") == "the answer"
    assert not slots.offer("m1", "a second part")  # the slot is closed: that part goes as a message


async def test_once_the_wait_ended_an_offer_is_refused_so_the_part_goes_as_a_message():
    slots = PassiveSlots()
    slot = slots.open("m2")
    assert slot is not None
    assert await slots.wait("m2", slot, 0.01) is None
    assert not slots.offer("m2", "too late")
    assert slots.given("m2") is None
    assert slots.open("m2") is not None  # WeChat's retry may wait again


async def test_a_closed_slot_takes_no_offer():
    slots = PassiveSlots()
    assert slots.open("m3") is not None
    slots.close("m3")  # the store could not take the message
    assert not slots.offer("m3", "x")


async def test_an_answer_taken_by_a_callback_that_then_went_away_is_given_to_the_retry():
    slots = PassiveSlots()
    slot = slots.open("m4")
    assert slot is not None
    waiting = asyncio.create_task(slots.wait("m4", slot, 60))
    await asyncio.sleep(0)
    assert slots.offer("m4", "the answer")
    waiting.cancel()  # WeChat hung up before the response was written
    await asyncio.gather(waiting, return_exceptions=True)
    assert slots.given("m4") == "the answer"


async def test_a_taken_offer_is_handed_over_only_once_its_response_was_written():
    slots = PassiveSlots()
    slot = slots.open("m5")
    assert slot is not None
    waiting = asyncio.create_task(slots.wait("m5", slot, 60))
    await asyncio.sleep(0)
    assert slots.offer("m5", "the answer")
    handing = asyncio.create_task(slots.handed_over("m5", 60))
    await asyncio.sleep(0.05)
    assert not handing.done()  # not counted sent while the response is still unwritten: a kill here loses no record
    assert await waiting == "the answer"
    slots.written("m5")  # the response's background step, after the body went out
    assert await handing


async def test_an_offer_whose_callback_went_away_is_counted_sent_after_the_handover_bound():
    slots = PassiveSlots()
    slot = slots.open("m6")
    assert slot is not None
    waiting = asyncio.create_task(slots.wait("m6", slot, 60))
    await asyncio.sleep(0)
    assert slots.offer("m6", "the answer")
    waiting.cancel()  # WeChat hung up: no response is ever written
    await asyncio.gather(waiting, return_exceptions=True)
    assert not await slots.handed_over("m6", 0.01)
    assert slots.given("m6") == "the answer"  # the retry gets it
