"""The written degradation rules, one test per rule."""

from __future__ import annotations

from gateway.core.capabilities import ChannelCapabilities, Dialect, TextUnit
from gateway.core.messages import ELEMENT_KINDS, Element, Emoji, Link, Media, MediaRef, Mention, MessageId, Quote, Style, Text, UserId
from gateway.render import degrade


def caps(*elements: str, dialect: Dialect = Dialect.MARKDOWN) -> ChannelCapabilities:
    return ChannelCapabilities(
        platform="test", text_limit=1000, text_unit=TextUnit.CHARS, dialect=dialect, elements=frozenset(elements)
    )


EVERYTHING = caps(*ELEMENT_KINDS)


def test_supported_elements_pass_through() -> None:
    elements = (
        Text(text="hi ", styles=frozenset({Style.BOLD})),
        Mention(user=UserId("u1"), display_name="Ann"),
        Link(url="https://x.org", text="x"),
        Media(kind="image", url="https://x.org/p.png"),
        Emoji(name="wave", fallback="👋"),
    )
    assert degrade(elements, EVERYTHING) == elements


def test_styled_text_becomes_plain_where_styles_cannot_show() -> None:
    bold = Text(text="hi", styles=frozenset({Style.BOLD}))
    assert degrade([bold], caps("text", dialect=Dialect.PLAIN)) == (Text(text="hi"),)
    assert degrade([bold], caps("text", dialect=Dialect.WHATSAPP)) == (bold,)


def test_mention_becomes_at_name() -> None:
    only_text = caps("text")
    assert degrade([Mention(user=UserId("u1"), display_name="Ann")], only_text) == (Text(text="@Ann"),)
    assert degrade([Mention(user=UserId("u1"))], only_text) == (Text(text="@u1"),)


def test_link_becomes_text_then_url() -> None:
    only_text = caps("text")
    assert degrade([Link(url="https://x.org", text="docs")], only_text) == (Text(text="docs (https://x.org)"),)
    assert degrade([Link(url="https://x.org")], only_text) == (Text(text="https://x.org"),)


def test_media_becomes_a_link_or_a_label() -> None:
    image = Media(kind="image", url="https://x.org/p.png", name="plot.png")
    assert degrade([image], caps("text", "link")) == (Link(url="https://x.org/p.png", text="plot.png"),)
    assert degrade([image], caps("text")) == (Text(text="plot.png (https://x.org/p.png)"),)
    unnamed = Media(kind="audio", url="https://x.org/a.ogg")
    assert degrade([unnamed], caps("text", "link")) == (Link(url="https://x.org/a.ogg", text="audio"),)
    stored = Media.inbound("image", MediaRef(locator="file-123", name="plot.png"))
    assert degrade([stored], caps("text", "link")) == (Text(text="[image: plot.png]"),)
    assert degrade([Media.inbound("file", MediaRef(locator="f"))], caps("text")) == (Text(text="[file]"),)


def test_quote_becomes_lines_before_the_message() -> None:
    quote = Quote(message=MessageId("m1"), text="what is 2+2?\nand 3+3?")
    out = degrade([Text(text="It is 4."), quote], caps("text"))
    assert out == (Text(text="> what is 2+2?\n> and 3+3?\nIt is 4."),)
    assert degrade([Quote(message=MessageId("m1")), Text(text="ok")], caps("text")) == (Text(text="ok"),)


def test_emoji_becomes_its_fallback_or_name() -> None:
    assert degrade([Emoji(name="wave", fallback="👋")], caps("text")) == (Text(text="👋"),)
    assert degrade([Emoji(name="partyparrot")], caps("text")) == (Text(text=":partyparrot:"),)


def test_adjacent_plain_text_is_merged_but_styles_are_kept_apart() -> None:
    bold = Text(text="!", styles=frozenset({Style.BOLD}))
    out = degrade([Text(text="hi "), Mention(user=UserId("u"), display_name="Ann"), bold], caps("text"))
    assert out == (Text(text="hi @Ann"), bold)


def test_every_kind_degrades_to_something_a_text_only_platform_shows() -> None:
    elements: list[Element] = [
        Text(text="t"), Mention(user=UserId("u")), Link(url="https://x.org"), Quote(message=MessageId("m"), text="q"),
        Emoji(name="e"),
        *(Media(kind=kind, url=f"https://x.org/{kind}") for kind in ("image", "audio", "video", "file")),
    ]
    out = degrade(elements, caps("text"))
    assert {element.kind for element in out} == {"text"}
