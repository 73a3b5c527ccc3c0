"""The NapCat channel: a personal QQ account through OneBot v11 websockets (forward or reverse), opt-in only.

Imported only when an account of it is configured; it needs no SDK (``websockets`` is core).
"""

from channels.napcat.channel import NapcatChannel
from channels.napcat.config import NapcatConfig

__all__ = ["NapcatChannel", "NapcatConfig"]
