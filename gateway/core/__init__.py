"""The vocabulary every part of the gateway speaks, and that imports nothing else of the project.

Messages and their elements, runtime events, turns, the error tree, declared
capabilities, probe results, the configuration's models and what a channel and
its supervisor say to each other.  Channels, the brain, the personas and the
application all import from here; this package imports only the standard
library and third-party packages (``tests/test_layering.py`` holds it so).
"""
