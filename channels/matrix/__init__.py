"""The Matrix channel (matrix-nio): see channel.py for the delivery rules, ADR 0012 for the choices."""

from channels.matrix.channel import MatrixChannel
from channels.matrix.config import InvitePolicy, MatrixConfig

__all__ = ["InvitePolicy", "MatrixChannel", "MatrixConfig"]
