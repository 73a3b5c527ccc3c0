"""One Slack app manifest: the file the console's form shows is the one docs/channels/slack.md embeds.

The manifest lives once, in ``channels/slack/manifest.yaml``; the guide's page reads it from there and
the doc carries it in its first YAML block, which this test holds to the file byte for byte (edit the
file and paste it into the doc, or the other way round).  The emulator's scopes are the manifest's too.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from gateway.console.accounts import slack_manifest
from tests.peers.slack_platform import BOT_SCOPES

ROOT = Path(__file__).resolve().parents[3]


def embedded(doc: Path) -> str:
    found = re.search(r"^```yaml\n(.*?)^```$", doc.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert found, f"{doc} has no yaml block"
    return found.group(1)


def test_the_doc_embeds_the_manifest_the_console_shows():
    assert embedded(ROOT / "docs/channels/slack.md") == slack_manifest()
    assert slack_manifest() == (ROOT / "channels/slack/manifest.yaml").read_text(encoding="utf-8")


def test_the_manifest_is_yaml_for_socket_mode_with_the_scopes_the_emulator_grants():
    manifest = yaml.safe_load(slack_manifest())
    assert manifest["settings"]["socket_mode_enabled"] is True
    assert tuple(manifest["oauth_config"]["scopes"]["bot"]) == BOT_SCOPES
