"""People and rules at work: who sees which item, who may decide it, how many must, and what expires.

:class:`People` joins the accounts (:mod:`._people`), the rules file
(:mod:`._rules`), the sessions and the audit log (:mod:`._audit`). The server
asks it three things:

* :meth:`People.visible`: the waiting items a person may decide (the inbox and
  ``GET /api/items`` show only these, and log that the person saw them);
* :meth:`People.admit`: before a decision is recorded, whether this person may
  make it (403 with the reason when not), and under a several-approver rule,
  whether this is the last approval (earlier ones are logged, 202, and the run
  waits); the decision is then signed with every approver's identity;
* :meth:`People.sweep`: items past their rule's ``expire_after`` are escalated
  (the second group sees them, a webhook says so) or denied with the rule's
  message, which the model reads.

With no accounts and no proxy (the one-person mode) everyone who has the
server's token may decide everything, as before, and the rules file is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from ..exceptions import UserError
from ..pending import Choice
from ._audit import Audit
from ._people import Accounts
from ._rules import Rule, Rules
from ._security import Sessions, Who
from ._service import ApiError
from ._views import ItemView, RunView

__all__ = ["COUNTED", "People", "person_of"]

COUNTED = ("approve", "retry")  # the verdicts that run a tool: a several-approver rule counts these

log = logging.getLogger("tether.serve")


def person_of(signature: str) -> str:
    """The person a signature stands for (``user:ana`` and ``proxy:ana`` are both ana, whom roles name)."""
    return signature.split(":", 1)[1] if ":" in signature else signature


class People:
    """See the module docstring."""

    def __init__(self, home: Path, rules: Rules, key: bytes) -> None:
        self.rules = rules
        self.accounts = Accounts(home / "users.json")
        self.audit = Audit(home / "audit.jsonl")
        self.sessions = Sessions(ttl=rules.session_hours * 3600, stamp=self.accounts.stamp)
        self._csrf_key = hmac.new(key, b"tether serve proxy csrf", hashlib.sha256).digest()
        if (rules.rules or rules.default.who != Rule(0).who) and not self.on:
            raise UserError(
                f"{rules.source}: rules name people, but nobody can prove who they are: add accounts "
                "(tether users add NAME) or configure an authenticating proxy ([identity] proxy_header)"
            )

    @property
    def on(self) -> bool:
        """People mode: decisions come from proven people, and the rules apply."""
        return bool(self.rules.proxy_header or self.rules.proxy_email_header) or self.accounts.any()

    def proxy_csrf(self, name: str) -> str:
        return hmac.new(self._csrf_key, name.encode(), hashlib.sha256).hexdigest()[:32]

    # -- who may decide ------------------------------------------------------------

    def rule(self, run: RunView, item: ItemView) -> Rule:
        return self.rules.rule_for(run.agent, item.tool, item.arguments)

    def why_not(self, who: Who | None, run: RunView, item: ItemView) -> str:
        """Why ``who`` may not decide ``item`` ('' when they may)."""
        if not self.on or (who is not None and who.kind == "rule"):
            return ""
        if who is None or not who.person:
            return "decisions need a person: sign in, or use a personal token (tether users token NAME)"
        rule = self.rule(run, item)
        if self.rules.may_decide(who.name, rule, self.audit.escalated(run.run_id, item.call_id)):
            return ""
        return f"{item.tool} here needs {' or '.join(rule.who)} ({rule.name} of {self.rules.source})"

    def visible(self, who: Who | None, items: Sequence[ItemView], runs: dict[str, RunView]) -> list[ItemView]:
        """The items ``who`` may decide, logged as seen by them."""
        shown = []
        for item in items:
            run = runs.get(item.run_id)
            if run is not None and not self.why_not(who, run, item) and not self._approved_by(who, run, item):
                shown.append(item)
                if who is not None and who.person:
                    self.audit.saw(who.reviewer(), item.run_id, item.call_id, item.tool)
        return shown

    def showed(self, who: Who | None, run: RunView) -> None:
        """Log that a person was shown a run's waiting items (its page, ``GET /api/runs/{id}``, its events),
        whether or not the rules give the items to them: reading a run is not deciding, but it is seen."""
        if self.on and who is not None and who.person:
            for item in run.waiting:
                self.audit.saw(who.reviewer(), item.run_id, item.call_id, item.tool)

    def _approved_by(self, who: Who | None, run: RunView, item: ItemView) -> bool:
        """Whether ``who`` already gave one of several approvals this item needs (then it waits for others)."""
        if who is None or not who.person or self.rule(run, item).approvers == 1:
            return False
        return who.name in map(person_of, self.audit.approvals(run.run_id, item.call_id, item.args_hash))

    def admit(self, run: RunView, item: ItemView, choice: Choice, who: Who | None, by: str) -> str:
        """The identity to sign the decision with; raises :class:`ApiError` (403, or 202: more approvers)."""
        if not self.on or (who is not None and who.kind == "rule"):
            return by
        where = {"run_id": run.run_id, "call_id": item.call_id, "tool": item.tool, "args_hash": item.args_hash}
        rule = self.rule(run, item)
        reason = self.why_not(who, run, item)
        if not reason and choice.args is not None:  # edited arguments are judged under their own rule too
            edited = self.rules.rule_for(run.agent, item.tool, choice.args)
            reason = self._edit_not_allowed(who, item, edited, rule)
            rule = rule if edited.approvers <= rule.approvers else edited  # the stricter count wins
        if reason:
            self.audit.write("refused", who.reviewer() if who else "", verdict=choice.verdict, reason=reason, **where)
            raise ApiError(403, "not-yours", f"you may not decide this: {reason}")
        assert who is not None
        if rule.approvers == 1 or choice.verdict not in COUNTED:
            return by  # one person decides; anyone allowed may stop it (deny, skip)
        if choice.args is not None:
            raise ApiError(422, "edit-needs-one-approver", f"{rule.name} asks {rule.approvers} people to approve "
                          "the same arguments: deny it with a message instead of editing")  # fmt: skip
        before = self.audit.approvals(run.run_id, item.call_id, item.args_hash)
        mine = [b for b in before if person_of(b) == who.name]  # the same person through any door counts once
        given = before if mine else [*before, by]
        if len(given) < rule.approvers:
            if not mine:
                self.audit.write("approved", by, verdict=choice.verdict, **where)
            raise ApiError(
                202,
                "needs-another-approver",
                f"your approval is recorded ({len(given)} of {rule.approvers}: {', '.join(given)}); "
                "the run goes on after the last approver",
                run,
            )
        return "+".join(given)

    def _edit_not_allowed(self, who: Who | None, item: ItemView, rule: Rule, own: Rule) -> str:
        """Why ``who`` may not approve the edited arguments under their ``rule`` ('' when they may).

        Under another rule than the item's ``own``, the edited call never waited, so it was never
        escalated: only that rule's ``who`` counts."""
        if who is None or rule == own or self.rules.may_decide(who.name, rule, escalated=False):
            return ""
        needs = " or ".join(rule.who)
        return f"{item.tool} with these edited arguments needs {needs} ({rule.name} of {self.rules.source})"

    def may_cancel(self, run: RunView, who: Who | None) -> None:
        """A person may end a run only if they may decide every item it waits on (403 with the reason)."""
        if not self.on or who is None or not who.person:
            return  # the server's own token (the operator's) may end any run; the cancel is still logged
        for item in run.waiting:
            if why := self.why_not(who, run, item):
                said = f"the run waits on {item.call_id}, which is not yours: {why}"
                where = {"run_id": run.run_id, "call_id": item.call_id, "tool": item.tool}
                self.audit.write("refused", who.reviewer(), verdict="cancel", reason=said, **where)
                raise ApiError(403, "not-yours", f"you may not cancel this run: {said}")

    def cancelled(self, run: RunView, by: str, reason: str) -> None:
        """Log a cancel, with the items the run waited on (it never decides them now)."""
        if self.on:
            waiting = [i.call_id for i in run.waiting]
            self.audit.write("cancelled", by, run_id=run.run_id, reason=reason, waiting=waiting)

    def decided(self, run: RunView, item: ItemView, choice: Choice, by: str) -> None:
        """Log a recorded decision."""
        self.audit.write(
            "decided",
            by,
            run_id=run.run_id,
            call_id=item.call_id,
            tool=item.tool,
            args_hash=item.args_hash,
            verdict=choice.verdict,
            edited=choice.args,
            message=choice.message,
        )

    # -- expiry ----------------------------------------------------------------------

    async def sweep(
        self,
        waiting: Callable[[], Awaitable[list[ItemView]]],
        view: Callable[[str], Awaitable[RunView | None]],
        deny: Callable[[str, Choice, str], Awaitable[Any]],
        notify: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        """Escalate or deny every item waiting past its rule's ``expire_after``."""
        now = time.time()
        for item in await waiting():
            run = await view(item.run_id)
            if run is None or item.decision is not None:
                continue
            rule = self.rule(run, item)
            if rule.expire_after is None or now - item.since < rule.expire_after:
                continue
            where = {"run_id": run.run_id, "call_id": item.call_id, "tool": item.tool, "rule": rule.name}
            if rule.then == "deny":
                choice = Choice("deny", item.call_id, message=rule.message, args_hash=item.args_hash)
                try:
                    await deny(run.run_id, choice, f"rule:{rule.name}")
                except Exception as exc:  # decided meanwhile, or the run moved: next sweep looks again
                    log.info("expiry of %s/%s not recorded: %s", run.run_id, item.call_id, exc)
                    continue
                self.audit.write("expired", f"rule:{rule.name}", verdict="deny", message=rule.message, **where)
            elif not self.audit.escalated(run.run_id, item.call_id):
                self.audit.write("escalated", f"rule:{rule.name}", to=list(rule.escalate_to), **where)
                if notify is not None:
                    notify({"event": "item-escalated", "to": list(rule.escalate_to), **where})
