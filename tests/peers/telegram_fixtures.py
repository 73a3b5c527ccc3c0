"""Session fixtures for the Telegram Bot API emulator, shared by the contract suite and tests/channels/telegram."""
