"""A Zulip bot account: the server, the bot's email and its API key, as written by hand or in a zuliprc.

Zulip hands a bot its credentials as a ``zuliprc`` file (Settings -> Bots ->
download), an INI file with an ``[api]`` section of ``email``, ``key`` and
``site``.  An account names that file (``zuliprc: /path/to/zuliprc``) or the
three values (``site``, ``email``, ``api_key: env:NAME``); the key never reaches
a log line either way.
"""

from __future__ import annotations

import configparser
from pathlib import Path

from pydantic import Field, SecretStr, model_validator

from gateway.core.config import AccountConfig, EnvSecret, secret_read


class ZulipConfig(AccountConfig):
    zuliprc: Path | None = None
    """The bot's zuliprc file; its ``[api]`` values fill whichever of the three below are not given."""
    site: str | None = None
    """The organization's address, ``https://school.zulipchat.com``."""
    email: str | None = None
    """The bot's email (``tutor-bot@school.zulipchat.com``): the user name of HTTP Basic auth."""
    api_key: EnvSecret | None = None
    """The bot's API key, read from the environment (``env:NAME``); never logged."""
    default_topic: str = Field(default="tutor", min_length=1, max_length=60)
    """The topic of a message to a stream that answers nothing (a teacher's report): replies keep their topic."""
    poll_timeout_s: float = Field(default=100.0, gt=0)
    """How long one long poll of ``GET /events`` may take; Zulip answers within about a minute with a heartbeat."""
    api_rate_per_minute: int | None = Field(default=None, ge=1)
    """The server's own per-user API limit, for a self-hosted Zulip whose operator changed the default
    (200 a minute, ``channels/platforms.toml``); the outbound path paces every request of this account to it."""
    catch_up_batch: int = Field(default=1000, ge=1, le=5000)
    """Messages read per ``GET /messages`` when a lost queue is caught up (Zulip allows at most 5000)."""

    @model_validator(mode="after")
    def _credentials(self) -> ZulipConfig:
        if self.zuliprc is not None:
            parser = configparser.ConfigParser()
            try:
                read = parser.read(self.zuliprc, encoding="utf-8")
            except configparser.Error as error:
                raise ValueError(f"zuliprc {self.zuliprc} is not an INI file: {type(error).__name__}") from None
            if not read or not parser.has_section("api"):
                raise ValueError(f"zuliprc {self.zuliprc}: no such file, or no [api] section in it")
            section = parser["api"]
            for name, key in (("site", "site"), ("email", "email")):
                if getattr(self, name) is None and section.get(key):
                    object.__setattr__(self, name, section[key].strip())
            if self.api_key is None and section.get("key"):
                read_key = SecretStr(section["key"].strip())
                secret_read(read_key, f"api_key (zuliprc {self.zuliprc.name})")
                object.__setattr__(self, "api_key", read_key)
        missing = [name for name in ("site", "email", "api_key") if getattr(self, name) is None]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}: name a zuliprc file, or give site, email and api_key")
        object.__setattr__(self, "site", str(self.site).rstrip("/"))
        return self

    @property
    def key(self) -> str:
        assert self.api_key is not None, "the validator refuses an account without one"
        return self.api_key.get_secret_value()
