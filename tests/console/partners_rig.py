"""A gateway started from a real, commented ``partners.yaml`` on disk, as ``partners serve --config`` starts it.

The console's partner edits are written back into that file (ADR 0039), so these tests need one:
the same partners and teachers as :mod:`tests.console.rig` (Ada owns ``algebra`` and ``geometry``,
Ben ``biology``), comments a round trip must keep, and -- with ``model_api`` -- ``algebra``'s model on
the stub model server and bound to the web chat, so a turn runs through litellm over loopback.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from gateway.app import Gateway
from gateway.configfile import load_config
from gateway.store.console import Role
from tests.console.rig import ADA_ID, BEN_ID, Quiet, Served, user
from tests.e2e.rig import STUB_KEY_ENV, served

KEPT_COMMENTS = ("# The school's gateway: kept by hand and by the console alike.",
                 "# Ada's first partner (teaches algebra to year 9)", "# Ben's biology partner")


def config_text(data_dir: Path, api_base: str | None = None) -> str:
    model = (f"    model:\n      model: openai/stub-model\n      api_base: {api_base}\n      api_key: env:{STUB_KEY_ENV}\n"
             f"      timeout_s: 60\n") if api_base else ""
    webchat = ("bindings:\n  - partner: algebra   # the web chat answers as Algebra\n    channel: webchat\n"
               "channels:\n  webchat:\n    default:\n      access:\n        dm: open\n") if api_base else ""
    return f"""{KEPT_COMMENTS[0]}
data_dir: {data_dir}
http:
  host: 127.0.0.1
  port: 0
pipeline:
  coalesce_window_s: 0
  shutdown_drain_s: 1

partners:
  {KEPT_COMMENTS[1]}
  - id: algebra
    name: Algebra
    mid_turn: queue      # a key the console does not edit: kept as written
{model}    owners:
      - channel: telegram
        user: "100"
  - id: geometry
    name: Geometry
    owners:
      - channel: matrix
        user: "@ada:school.example"
      - channel: telegram
        user: "100"
  {KEPT_COMMENTS[2]}
  - id: biology
    name: Biology
    owners:
      - channel: matrix
        user: "@ben:school.example"
{webchat}"""


def write_config(folder: Path, api_base: str | None = None) -> Path:
    path = folder / "partners.yaml"
    path.write_text(config_text(folder / "data", api_base), encoding="utf-8")
    return path


@contextlib.asynccontextmanager
async def serve_file(path: Path, *, own_brain: bool = False, with_users: bool = True) -> AsyncIterator[Served]:
    """Serve the gateway ``path`` describes; ``own_brain`` builds its real brain (a turn reaches the model)."""
    async with Gateway(load_config(path), responder=None if own_brain else Quiet()) as gateway, served(gateway) as url:
        if with_users:
            for made in (user("root", Role.ADMINISTRATOR), user("ada", Role.TEACHER, ADA_ID), user("ben", Role.TEACHER, BEN_ID)):
                await gateway.store.add_console_user(made)
        yield Served(url, gateway)
