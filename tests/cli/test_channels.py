"""`partners channels` lists every channel, with the reason those that cannot run here cannot."""

from __future__ import annotations

BUILT_IN = {
    "webchat", "console", "telegram", "discord", "slack", "feishu", "wecom", "weixin", "dingtalk",
    "qq", "napcat", "mochat", "whatsapp", "matrix", "mattermost", "msteams", "zulip", "email",
}


def test_lists_all_eighteen_built_in_channels_with_availability_and_reason(invoke):
    result = invoke("channels")

    assert result.exit_code == 0, result.output
    header, *rows = result.output.strip().splitlines()
    assert header.split() == ["CHANNEL", "TITLE", "AVAILABLE", "FEATURES", "REASON"]
    by_name = {row.split()[0]: row for row in rows}
    assert len(BUILT_IN) == 18 and BUILT_IN <= set(by_name)
    # every channel is written, and the test environment installs every extra: all eighteen run here
    assert all("  yes" in by_name[name] for name in BUILT_IN), [r for r in rows if "  yes" not in r]
    assert not any("not implemented" in row for row in rows)


def test_lists_plugin_channels_too(invoke):
    result = invoke("channels")

    assert any(row.split()[0] == "relay" for row in result.output.splitlines())


def test_each_built_in_channel_says_what_it_can_do_from_its_declared_capabilities(invoke):
    result = invoke("channels")

    by_name = {row.split()[0]: row for row in result.output.strip().splitlines()[1:]}
    assert "edits in place, groups by mention, threads, reactions, typing, files: audio/file/image/video" in by_name["telegram"]
    assert "groups by mention" not in by_name["whatsapp"] and "typing" in by_name["whatsapp"]
    assert "edits in place" in by_name["slack"]  # declared; threads stream natively (SlackChannel.stream_mode)


def test_a_platform_with_several_kinds_of_account_lists_each_kind_with_its_own_features(invoke):
    """WeChat's two kinds (ADR 0033) share a channel and differ in nearly every fact a teacher chooses by."""
    from channels.weixin.config import DEFAULT_KIND

    result = invoke("channels")

    rows = [row for row in result.output.strip().splitlines()[1:] if row.split()[0] == "weixin"]
    by_kind = {row.split()[1]: row for row in rows}
    assert list(by_kind) == [f"({DEFAULT_KIND})", "(official_account)"]
    official = by_kind["(official_account)"]
    assert "one-to-one only, replies within 48 h, 5 replies per message" in official  # platforms.toml's OA row
    assert "groups by mention" not in official and "typing" not in official and "files:" not in official
    assert "groups by mention" in by_kind["(ilink)"] and "replies within 48 h" not in by_kind["(ilink)"]


def test_a_platform_with_one_kind_of_account_keeps_one_unlabelled_row(invoke):
    result = invoke("channels")

    assert [row.split()[0] for row in result.output.splitlines()].count("telegram") == 1
    assert "replies within" not in next(row for row in result.output.splitlines() if row.startswith("telegram "))
