"""One way a console area changes the config file: through the console's one editor, then live.

Partners and bindings both write :mod:`gateway.configedit` changes.  :func:`write_edit` is that
write: the editor's refusals become :class:`Refused` with the status the pages and the API answer
(no file or a stale version 409, a partner or binding not in the file 404, a place already bound
409, a file that would not load 400, in its own words), and a written config is handed to the
running gateway (``Gateway.apply``, ADR 0039).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.configedit import Change, NoConfigFile, NoSuchBinding, NoSuchPartner, PlaceTaken, StaleFile
from gateway.core.config import Config
from gateway.core.errors import ConfigError

if TYPE_CHECKING:  # pages imports the areas
    from gateway.console.pages import Console

NO_FILE = "edits need a config file: this gateway runs on its embedded default; start it with --config FILE"


class Refused(Exception):
    """An edit refused before or while it reached the file: the status and the message to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


async def write_edit(console: Console, change: Change, version: str) -> Config:
    """Apply ``change`` to the file at ``version`` and take it live; :class:`Refused` otherwise."""
    try:
        config = await console.editor.apply(change, version)
    except NoConfigFile:
        raise Refused(409, NO_FILE) from None
    except (StaleFile, PlaceTaken) as error:
        raise Refused(409, str(error)) from None
    except NoSuchPartner:
        raise Refused(404, "no such partner") from None
    except NoSuchBinding as error:
        raise Refused(404, str(error)) from None
    except ConfigError as error:
        raise Refused(400, str(error)) from None
    if console.gateway is not None:
        console.gateway.apply(config)
    return config
