"""Which partner answers a message: deterministic, from bindings, never from the model."""

from __future__ import annotations

from collections.abc import Iterable

from gateway.core.config import Binding, PartnerConfig
from gateway.core.messages import Address


class Router:
    """Most specific binding wins: conversation (chat + thread) > chat > whole account."""

    def __init__(self, partners: Iterable[PartnerConfig], bindings: Iterable[Binding]) -> None:
        self._partners: dict[str, PartnerConfig] = {}
        self._by_key: dict[tuple[str, str, str | None, str | None], PartnerConfig] = {}
        self.replace(partners, bindings)

    def replace(self, partners: Iterable[PartnerConfig], bindings: Iterable[Binding]) -> None:
        """Route by a new partner set from now on (a console edit, ``Gateway.apply``).

        Everyone who routes holds this one router, so they all see the new set at once; the table is
        built whole and then swapped, so no message is ever routed by half of each."""
        known = {p.id: p for p in partners}
        table: dict[tuple[str, str, str | None, str | None], PartnerConfig] = {}
        for binding in bindings:
            table[(binding.channel, binding.account, binding.chat, binding.thread)] = known[binding.partner]
        self._partners, self._by_key = known, table

    def partner(self, partner_id: str) -> PartnerConfig | None:
        """The partner with this id as the gateway runs it (its persona's defaults filled in), bound or not."""
        return self._partners.get(partner_id)

    def bind(self, binding: Binding) -> None:
        """Add a binding while the gateway runs (a channel account added in the console); KeyError: unknown partner."""
        self._by_key[(binding.channel, binding.account, binding.chat, binding.thread)] = self._partners[binding.partner]

    def unbind_account(self, channel: str, account: str) -> None:
        """Forget every binding of the account (it was deleted in the console)."""
        for key in [key for key in self._by_key if key[:2] == (channel, account)]:
            del self._by_key[key]

    def route(self, address: Address) -> PartnerConfig | None:
        conversation = address.conversation
        for chat, thread in ((conversation.chat, conversation.thread), (conversation.chat, None), (None, None)):
            partner = self._by_key.get((address.channel, address.account, chat, thread))
            if partner is not None:
                return partner
        return None

    def for_account(self, channel: str, account: str) -> PartnerConfig | None:
        """The partner bound to the whole account (no chat or thread), if any."""
        return self._by_key.get((channel, account, None, None))

    def accounts(self) -> set[tuple[str, str]]:
        return {(channel, account) for channel, account, _chat, _thread in self._by_key}
