"""The kit's access token: one fetch at a time, fetched before its end, replaced once when refused."""

from __future__ import annotations

import asyncio

from channels._kit.tokens import AccessToken, Grant, lifetime


class Issuer:
    """Hands out numbered tokens, slowly enough that concurrent callers overlap."""

    def __init__(self, lasts_s: float = 7200.0) -> None:
        self.issued, self.lasts_s = 0, lasts_s

    async def __call__(self) -> Grant:
        await asyncio.sleep(0.01)
        self.issued += 1
        return Grant(f"t{self.issued}", self.lasts_s)


async def test_a_burst_that_finds_no_token_waits_on_one_fetch():
    issuer = Issuer()
    tokens = AccessToken(issuer)
    got = await asyncio.gather(*(tokens.get() for _ in range(20)))
    assert set(got) == {"t1"} and issuer.issued == 1 and tokens.fetched == 1


async def test_a_token_is_fetched_again_margin_seconds_before_its_end():
    now = [1000.0]
    issuer = Issuer(lasts_s=7200.0)
    tokens = AccessToken(issuer, margin_s=60.0, clock=lambda: now[0])
    assert await tokens.get() == "t1"
    now[0] += 7200.0 - 61.0
    assert await tokens.get() == "t1"
    now[0] += 2.0  # inside the margin: a call could leave with a token that dies on the way
    assert await tokens.get() == "t2"


async def test_ten_calls_refused_with_one_token_cause_one_new_fetch():
    issuer = Issuer()
    tokens = AccessToken(issuer)
    first = await tokens.get()
    again = await asyncio.gather(*(tokens.get(stale=first) for _ in range(10)))
    assert set(again) == {"t2"} and issuer.issued == 2
    assert await tokens.get(stale="t1") == "t2"  # a late refusal of the old token fetches nothing
    tokens.forget()
    assert await tokens.get() == "t3"


def test_a_stated_lifetime_is_read_from_numbers_and_numeric_strings_only():
    assert lifetime(7200, 1.0) == 7200.0 and lifetime("3600", 1.0) == 3600.0
    assert lifetime(None, 5.0) == 5.0 and lifetime("", 5.0) == 5.0 and lifetime("soon", 5.0) == 5.0
    assert lifetime(True, 5.0) == 5.0 and lifetime({"s": 1}, 5.0) == 5.0
