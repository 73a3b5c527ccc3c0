"""Who sees what in the teacher console: the one place that decides it.

A request's :class:`Viewer` is made once, from its session (:mod:`gateway.console.signin`), and every
console route asks it -- never the role, never the session -- whether a partner is in sight:

* an **administrator** sees every partner;
* a **teacher** sees the partners whose ``owners`` list their account (``CHANNEL:USER``, the same
  identity ``http.admin_tokens`` use), and nothing else;
* a **stranger** (no session, a forged or expired one, a disabled user) sees nothing.

A partner a viewer does not see is answered as if it did not exist (404): a teacher learns nothing of
another teacher's partners, not even their ids.  Routes that only an administrator may use at all (the
console's users) answer a teacher 403 -- the route exists, the role does not reach it.  Later console
pages (channels, learners, knowledge) add their own ``sees_*`` here, next to these, so the whole model
stays readable in one file and one test walks it (``tests/console/test_authorization.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.config import Config, PartnerConfig
from gateway.store.console import ConsoleUser, Role


@dataclass(frozen=True)
class Viewer:
    """The person behind one request, as far as the console's permissions go."""

    username: str | None
    """None for a stranger."""
    display_name: str
    role: Role | None
    teacher: str | None
    """A teacher's account, ``CHANNEL:USER``; None for an administrator and a stranger."""

    @classmethod
    def stranger(cls) -> Viewer:
        return cls(None, "", None, None)

    @classmethod
    def of(cls, user: ConsoleUser | None) -> Viewer:
        """The viewer a signed-in user is; a stranger for none or a disabled one."""
        if user is None or user.disabled:
            return cls.stranger()
        return cls(user.username, user.display_name, user.role, user.teacher)

    @property
    def signed_in(self) -> bool:
        return self.role is not None

    @property
    def administers(self) -> bool:
        return self.role is Role.ADMINISTRATOR

    def sees(self, partner: PartnerConfig) -> bool:
        if self.role is Role.ADMINISTRATOR:
            return True
        if self.role is Role.TEACHER and self.teacher is not None:
            return partner.owned_by(self.teacher)
        return False

    def partners(self, config: Config) -> list[PartnerConfig]:
        """The partners in sight, in the config's order."""
        return [partner for partner in config.partners if self.sees(partner)]

    def partner(self, config: Config, partner_id: str) -> PartnerConfig | None:
        """The partner with this id if the viewer sees it; None for one that is not there *or* not theirs."""
        return next((partner for partner in self.partners(config) if partner.id == partner_id), None)

    # ------------------------------------------------------------------ channel accounts

    def sees_account(self, config: Config, channel: str, account: str) -> bool:
        """An administrator sees every account; a teacher the accounts bound to a partner of theirs
        (any binding: the whole account, or one chat or thread of it)."""
        if self.role is Role.ADMINISTRATOR:
            return True
        seen = {partner.id for partner in self.partners(config)}
        return bool(seen & bound_partners(config, channel, account))

    def operates_account(self, config: Config, channel: str, account: str) -> bool:
        """Who may disable, enable or restart an account: an administrator, or a teacher when every
        partner bound to it is theirs -- stopping an account another teacher's partner also answers
        on would silence that teacher's learners too."""
        if self.role is Role.ADMINISTRATOR:
            return True
        bound = bound_partners(config, channel, account)
        seen = {partner.id for partner in self.partners(config)}
        return bool(bound) and bound <= seen


    def acts_for(self, config: Config, partner_id: str) -> bool:
        """Whether the viewer may change what was made for this partner (a console-made channel account that does
        not run, so no binding speaks for it): an administrator for any id, even one gone from the file; a teacher
        for their own partners."""
        return self.administers or self.partner(config, partner_id) is not None


def bound_partners(config: Config, channel: str, account: str) -> set[str]:
    """The partners the config's bindings route any of this account's messages to."""
    return {b.partner for b in config.bindings if b.channel == channel and b.account == account}


# ------------------------------------------------------------------ personas (gateway.console.personas)

def persona_users(config: Config, persona: str) -> list[PartnerConfig]:
    """The partners that speak with this persona."""
    return [partner for partner in config.partners if partner.persona == persona]


def sees_persona(viewer: Viewer, config: Config, persona: str) -> bool:
    """An administrator sees every persona; a teacher those their own partners use (any other is 404)."""
    if viewer.administers:
        return True
    return any(viewer.sees(partner) for partner in persona_users(config, persona))


def edits_persona(viewer: Viewer, config: Config, persona: str) -> bool:
    """Who may change a persona: an administrator, or a teacher when every partner using it is theirs --
    a persona is shared, and changing one another teacher's partner speaks with changes that partner too."""
    if viewer.administers:
        return True
    users = persona_users(config, persona)
    return bool(users) and all(viewer.sees(partner) for partner in users)
