"""``fleet:`` in partners.yaml: the lease timings of ADR 0051, refused when they cannot keep one owner per account.

A lease that a node stops trusting only after it expired (fence margin not inside the lease), or renewals that
come after the node has already fenced itself off, would let two nodes run one account; such a file is a
config error naming the field, never a gateway that starts.
"""

from __future__ import annotations

import pytest
import yaml

from gateway.configfile import parse_config
from gateway.core.errors import ConfigError


def parsed(fleet: str):
    return parse_config(yaml.safe_load(f"fleet:\n{fleet}"), source="partners.yaml")


def test_the_defaults_take_a_dead_nodes_accounts_within_fifteen_seconds():
    fleet = parsed("  node: n1\n").fleet
    assert fleet.node == "n1"
    assert fleet.lease_s + fleet.look_every_s <= 15.0
    assert fleet.renew_every_s < fleet.lease_s - fleet.fence_margin_s


@pytest.mark.parametrize(("fleet", "field"), [
    ("  lease_s: 3\n  fence_margin_s: 3\n", "fence_margin_s"),
    ("  lease_s: 10\n  fence_margin_s: 2\n  renew_every_s: 8\n", "renew_every_s"),
    ("  lease_s: 0\n", "lease_s"),
    ("  poll_s: -1\n", "poll_s"),
    ("  leases: 10\n", "leases"),
])
def test_timings_that_could_let_two_nodes_run_one_account_are_refused(fleet, field):
    with pytest.raises(ConfigError) as refused:
        parsed(fleet)
    assert field in str(refused.value)
