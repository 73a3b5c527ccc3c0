"""Loopback peers: one emulated or real platform per channel, started by the tests.

Each peer runs in its own process on 127.0.0.1 and is stopped by its process id.
"""
