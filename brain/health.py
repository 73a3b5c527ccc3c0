"""Whether each partner's model answers: the teacher's view of the model seam.

The model client reports every failed attempt and every answer here, per
partner (``ModelRequest.partner``); ``/status``, ``partners status`` and the
``partners_model_errors_total{partner,kind}`` metric read it.  A partner's
model is

- ``untried`` until its first call since the gateway started;
- ``ok`` once its own model answered the latest call;
- ``degraded`` while its ``backup`` answers because the primary fails;
- ``failing`` from the first failed attempt until a model answers again.

``since`` is when the current run of failures began: a teacher reading
"failing since 21:40" knows how long learners have been getting notes answers.
One answer from the primary brings the state back to ``ok``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import Enum

log = logging.getLogger(__name__)


class ModelState(str, Enum):
    UNTRIED = "untried"
    OK = "ok"
    DEGRADED = "degraded"
    FAILING = "failing"

    @property
    def in_error(self) -> bool:
        """A state the teacher should act on (``partners status`` exits non-zero)."""
        return self in (ModelState.DEGRADED, ModelState.FAILING)


@dataclass(frozen=True)
class ModelCondition:
    """One partner's model, as last seen."""

    state: ModelState = ModelState.UNTRIED
    model: str = ""
    """The model that failed (failing, degraded) or answered (ok)."""
    kind: str = ""
    """The failure's ``ModelErrorKind`` value (timeout, unreachable, auth, ...)."""
    reason: str = ""
    since: datetime | None = None
    """When the state began: the first failure of the current run, or the answer that ended it."""
    failures: int = 0
    """Failed attempts since the last answer from the partner's own model."""


@dataclass(frozen=True)
class _Failure:
    model: str
    kind: str
    reason: str


def _now() -> datetime:
    return datetime.now(UTC)


class ModelHealth:
    """Per partner, the model's condition; ``on_error(partner, kind)`` hears every failed attempt."""

    def __init__(self, *, on_error: Callable[[str, str], None] | None = None,
                 clock: Callable[[], datetime] = _now) -> None:
        self.on_error = on_error
        self.clock = clock
        self._conditions: dict[str, ModelCondition] = {}
        self._last_failure: dict[tuple[str, str], _Failure] = {}

    def condition(self, partner: str) -> ModelCondition:
        return self._conditions.get(partner, ModelCondition())

    def failed(self, partner: str, model: str, kind: str, reason: str) -> None:
        """One attempt failed (it may still be retried, or its backup may answer)."""
        if not partner:
            return
        if self.on_error is not None:
            self.on_error(partner, kind)
        self._last_failure[(partner, model)] = _Failure(model, kind, reason)
        before = self.condition(partner)
        since = before.since if before.state in (ModelState.FAILING, ModelState.DEGRADED) else self.clock()
        if before.state is not ModelState.FAILING:
            log.warning("model failing partner=%s model=%s kind=%s reason=%s", partner, model, kind, reason)
        self._conditions[partner] = ModelCondition(ModelState.FAILING, model, kind, reason, since, before.failures + 1)

    def answered(self, partner: str, model: str, primary: str) -> None:
        """``model`` answered a call of ``partner``, whose own model is ``primary``."""
        if not partner:
            return
        before = self.condition(partner)
        if model == primary:
            if before.state is not ModelState.OK:
                if before.state is not ModelState.UNTRIED:
                    log.info("model ok again partner=%s model=%s after failures=%d", partner, model, before.failures)
                self._conditions[partner] = ModelCondition(ModelState.OK, model, since=self.clock())
            return
        failure = self._last_failure.get((partner, primary))
        since = before.since if before.state in (ModelState.FAILING, ModelState.DEGRADED) else self.clock()
        degraded = ModelCondition(
            ModelState.DEGRADED, primary, failure.kind if failure else "", failure.reason if failure else "",
            since, before.failures,
        )
        if before.state is not ModelState.DEGRADED:
            log.warning("model degraded partner=%s model=%s backup=%s answers", partner, primary, model)
        self._conditions[partner] = replace(degraded, reason=(degraded.reason + f" (backup {model} answers)").lstrip())
