"""Many gateway nodes on one PostgreSQL: who owns what, for how long (ADR 0051).

:mod:`.leases` keeps the lease rows (take, renew, release, the fleet's view); :mod:`.keeper` renews
a node's leases in the background and fences the node off what it can no longer prove it holds.
"""
