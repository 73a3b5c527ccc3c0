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
    assert "  yes" in by_name["webchat"] and "  yes" in by_name["console"]
    assert "  no " in by_name["zulip"]
    assert by_name["zulip"].rstrip().endswith("not implemented in this release yet")


def test_lists_plugin_channels_too(invoke):
    result = invoke("channels")

    assert any(row.split()[0] == "relay" for row in result.output.splitlines())


def test_each_built_in_channel_says_what_it_can_do_from_its_declared_capabilities(invoke):
    result = invoke("channels")

    by_name = {row.split()[0]: row for row in result.output.strip().splitlines()[1:]}
    assert "edits in place, groups by mention, threads, reactions, typing, files: audio/file/image/video" in by_name["telegram"]
    assert "groups by mention" not in by_name["whatsapp"] and "typing" in by_name["whatsapp"]
    assert "edits in place" in by_name["slack"]  # declared; threads stream natively (SlackChannel.stream_mode)
