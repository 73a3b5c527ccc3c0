"""A channel whose packages are missing says how to get them, also when its catalog row names no extra."""

from __future__ import annotations

import pytest

import channels.registry as registry
from gateway.core.capabilities import PlatformEntry, platform_catalog
from gateway.core.errors import ChannelUnavailable


@pytest.fixture
def catalog_without_extra(monkeypatch: pytest.MonkeyPatch) -> PlatformEntry:
    row = platform_catalog()["telegram"].model_copy(update={"name": "faxline", "extra": None,
                                                           "requires": ("faxline_sdk_not_installed",)})
    monkeypatch.setattr(registry, "platform_catalog", lambda: {"faxline": row})
    return row


def test_listing_names_the_missing_package_not_a_none_extra(catalog_without_extra: PlatformEntry) -> None:
    [listing] = [row for row in registry.list_channels() if row.name == "faxline"]
    assert not listing.available
    assert "None" not in listing.reason and "faxline_sdk_not_installed" in listing.reason


def test_loading_names_the_missing_package_not_a_none_extra(catalog_without_extra: PlatformEntry) -> None:
    with pytest.raises(ChannelUnavailable) as caught:
        registry.load_channel("faxline")
    assert "None" not in str(caught.value) and "faxline_sdk_not_installed" in str(caught.value)
