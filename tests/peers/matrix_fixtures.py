"""Session fixtures for a Synapse homeserver, shared by the contract suite and tests/channels/matrix."""
