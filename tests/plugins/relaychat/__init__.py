"""A plugin channel for the relay platform emulator, registered as ``relay``.

Installed for the tests by putting ``tests/plugins`` on ``PYTHONPATH``: the
``relaychat_plugin-0.1.dist-info`` next to this package declares the
``partners.channels`` entry point, so ``importlib.metadata`` finds it exactly
as it would a pip-installed plugin.
"""

from relaychat.channel import CAPABILITIES, RelayChannel, RelayConfig

__all__ = ["CAPABILITIES", "RelayChannel", "RelayConfig"]
