"""Personal WeChat through Tencent's iLink bot API (``kind: ilink``): login by QR code, long poll, replies by context token."""
