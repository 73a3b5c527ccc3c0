"""Partners Gateway: AI tutor partners on the chat apps learners already use."""

__version__ = "0.1.0"
