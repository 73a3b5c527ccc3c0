"""Every declared capability has a reader, and the catalog refuses a row that declares nonsense.

A field of ``ChannelCapabilities`` that no code reads is a platform fact the
gateway claims to honour and does not: the limit is in the data, nothing
enforces it.  This test reads the source (an AST walk, lazy imports and all)
of every package (the model's own validator excluded) and fails on a field nobody
reads -- give it a reader in the outbound path (or wherever the fact matters)
or remove it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gateway.core.capabilities as capabilities_module
from gateway.core.capabilities import ChannelCapabilities, GroupAddressing, Proactive, platform_catalog
from gateway.core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "channels", "brain", "personas")
DECLARATION = Path(capabilities_module.__file__).resolve()
SIXTEEN = {"telegram", "discord", "slack", "feishu", "wecom", "weixin", "dingtalk", "qq", "napcat", "mochat",
           "whatsapp", "matrix", "mattermost", "msteams", "zulip", "email"}


def attributes_read() -> dict[str, set[str]]:
    """Attribute name -> the files that read it from a capabilities object, outside the model itself.

    A read is ``<expr>.name`` in a load context where ``<expr>`` names capabilities (``caps``,
    ``outlet.capabilities``, ``self.capabilities()``, ``capabilities_of("email")``), so a
    channel's ``typing()`` method does not count as a reader of the ``typing`` fact."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if path.resolve() == DECLARATION:  # its helpers (fetch_limit, ...) read; the model's own validator does not count
                tree.body = [n for n in tree.body if not (isinstance(n, ast.ClassDef) and n.name == "ChannelCapabilities")]
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and "cap" in ast.unparse(node.value):
                    found.setdefault(node.attr, set()).add(str(path.relative_to(ROOT)))
    return found


READ = attributes_read()


@pytest.mark.parametrize("field", sorted(ChannelCapabilities.model_fields))
def test_every_declared_capability_has_a_reader_outside_its_declaration(field):
    assert READ.get(field), (
        f"ChannelCapabilities.{field} is declared but nothing in {', '.join(PACKAGES)} reads it: "
        "enforce it where the fact matters, or remove the field and its platforms.toml lines"
    )


def test_the_catalog_declares_the_sixteen_platforms_and_the_two_built_in_channels():
    catalog = platform_catalog()
    assert SIXTEEN | {"webchat", "console"} == set(catalog)
    assert all(entry.capabilities.platform == name for name, entry in catalog.items())


def test_free_text_facts_are_closed_sets():
    catalog = platform_catalog()
    assert catalog["qq"].capabilities.proactive is Proactive.NONE
    assert catalog["whatsapp"].capabilities.group_addressing is GroupAddressing.DIRECT_ONLY
    assert {e.capabilities.proactive for e in catalog.values()} <= set(Proactive)


ROW = """
[demo]
title = "Demo"
module = "demo:Demo"
[demo.capabilities]
text_limit = 100
text_unit = "chars"
dialect = "plain"
elements = ["text"]
"""


@pytest.mark.parametrize(("line", "said"), [
    ('proactive = "5 per 48 h"', "proactive"),
    ('group_addressing = "sometimes"', "group_addressing"),
    ('elements = ["text", "hologram"]', "unknown kinds ['hologram']"),
    ('media_kinds = ["image"]', "media_max_bytes"),
    ("group_reply_window_s = 300", "reply_window_s, which is not declared"),
    ("replies_per_inbound = 0", "replies_per_inbound"),
    ("reply_window_s = -1", "reply_window_s"),
    ("text_limit = 0", "text_limit"),
    ("max_text = 5", "max_text"),
])
def test_a_wrong_row_is_refused_when_the_catalog_loads_naming_the_platform_and_the_field(tmp_path, line, said):
    path = tmp_path / "platforms.toml"
    body = ROW.replace('elements = ["text"]\n', "") if line.startswith("elements") else ROW
    body = body.replace("text_limit = 100\n", "") if line.startswith("text_limit") else body
    path.write_text(body + line + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        platform_catalog(path)
    assert "'demo'" in str(refused.value) and said in str(refused.value)


def test_a_right_row_loads(tmp_path):
    path = tmp_path / "platforms.toml"
    path.write_text(ROW + 'proactive = "none"\nreplies_per_inbound = 5\n', encoding="utf-8")
    caps = platform_catalog(path)["demo"].capabilities
    assert caps.proactive is Proactive.NONE and caps.replies_per_inbound == 5
