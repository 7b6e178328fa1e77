"""The rules file (``tether serve --rules rules.toml``): who may decide what, read and checked at start.

::

    [identity]
    session_hours = 8                 # a signed-in session ends after this long (default 12)
    proxy_header = "X-Forwarded-User" # trust an authenticating proxy ...
    proxy_addresses = ["127.0.0.1"]   # ... only when the request comes from these addresses

    [roles]
    lead = ["ana"]
    clerk = ["bo", "cy"]

    [[rule]]                          # the first rule that matches a call applies
    tool = "issue_refund"
    when = "amount > 500"             # path op JSON-literal, joined by "and"
    who = ["lead"]                    # roles (or people) who may decide; "*": anyone signed in
    approvers = 2                     # distinct people; the run resumes after the last
    expire_after = "30m"              # then: "escalate" (to escalate_to) or "deny" (with message)
    then = "escalate"
    escalate_to = ["clerk"]

    [default]
    who = ["*"]                       # calls no rule matches (the default default: anyone)

A mistake stops the server at start with the file, the line and what is
wrong. A condition that cannot be evaluated on a call's arguments (a missing
field, a string where a number was meant) counts as *true*: the stricter rule
applies. Rules gate open items only: a decision already recorded stays.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import UserError

__all__ = ["ANYONE", "Rule", "Rules", "load_rules"]

ANYONE = "*"
OPS = (">=", "<=", "==", "!=", ">", "<", " in ")
TERM = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(>=|<=|==|!=|>|<|\sin\s)\s*(.+?)\s*$")
SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
RULE_KEYS = {"tool", "agent", "when", "who", "approvers", "expire_after", "then", "escalate_to", "message"}


@dataclass(frozen=True, slots=True)
class Term:
    path: tuple[str, ...]
    op: str
    value: Any

    def holds(self, args: Any) -> bool:
        here = args
        for key in self.path:
            if not isinstance(here, dict) or key not in here:
                return True  # cannot be evaluated: the stricter rule applies
            here = here[key]
        try:
            if self.op == "in":
                return bool(here in self.value)
            return bool(
                {
                    ">": lambda a, b: a > b,
                    ">=": lambda a, b: a >= b,
                    "<": lambda a, b: a < b,
                    "<=": lambda a, b: a <= b,
                    "==": lambda a, b: a == b,
                    "!=": lambda a, b: a != b,
                }[self.op](here, self.value)
            )
        except TypeError:
            return True


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``[[rule]]`` table (``line``: where it starts in the file, for messages and the audit)."""

    line: int
    tool: str = ANYONE
    agent: str = ANYONE
    when: tuple[Term, ...] = ()
    when_text: str = ""
    who: tuple[str, ...] = (ANYONE,)
    approvers: int = 1
    expire_after: float | None = None
    then: str = ""
    escalate_to: tuple[str, ...] = ()
    message: str = ""

    def matches(self, agent: str, tool: str, args: Any) -> bool:
        return (
            fnmatch.fnmatchcase(tool, self.tool)
            and fnmatch.fnmatchcase(agent, self.agent)
            and all(t.holds(args) for t in self.when)
        )

    @property
    def name(self) -> str:
        return f"rule at line {self.line}" if self.line else "the default rule"


@dataclass(frozen=True, slots=True)
class Rules:
    """The whole file: identity settings, roles, the rules in order, and the default."""

    source: str = ""
    session_hours: float = 12.0
    proxy_header: str = ""
    proxy_email_header: str = ""
    proxy_addresses: tuple[str, ...] = ()
    roles: dict[str, frozenset[str]] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    default: Rule = Rule(0)
    audit: tuple[str, ...] = (ANYONE,)

    def rule_for(self, agent: str, tool: str, args: Any) -> Rule:
        return next((r for r in self.rules if r.matches(agent, tool, args)), self.default)

    def is_one_of(self, person: str, groups: tuple[str, ...]) -> bool:
        """Whether ``person`` is named in ``groups`` (roles or names; ``*``: anyone signed in)."""
        return any(g in (ANYONE, person) or person in self.roles.get(g, ()) for g in groups)

    def may_decide(self, person: str, rule: Rule, escalated: bool) -> bool:
        """Whether ``person`` may decide an item under ``rule`` (``escalated``: it waited past its time)."""
        if self.is_one_of(person, rule.who):
            return True
        return escalated and rule.then == "escalate" and self.is_one_of(person, rule.escalate_to)

    def trusted_proxy(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in ipaddress.ip_network(a, strict=False) for a in self.proxy_addresses)


def load_rules(path: str | Path) -> Rules:
    """Read and check a rules file; a UserError names the file, the line and the mistake."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read the rules file {str(path)!r}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    return _parse(data, text, str(path))


def _parse(data: dict[str, Any], text: str, where: str) -> Rules:
    lines = _table_lines(text)

    def fail(table: str, message: str) -> UserError:
        return UserError(f"{where}:{lines.get(table, 1)}: {message}")

    unknown = set(data) - {"identity", "roles", "rule", "default", "audit"}
    if unknown:
        raise fail("", f"unknown section {sorted(unknown)[0]!r} (known: identity, roles, rule, default, audit)")
    ident = _table(data, "identity", fail)
    roles = _roles(_table(data, "roles", fail), fail)
    rules = []
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list):
        raise fail("rule", "rules are written [[rule]] (an array of tables)")
    for n, raw in enumerate(raw_rules):
        rules.append(_rule(raw, lines.get(f"rule#{n}", 1), roles, fail=lambda m, n=n: fail(f"rule#{n}", m)))
    default = _rule(_table(data, "default", fail), 0, roles, fail=lambda m: fail("default", m))
    header = ident.get("proxy_header", "")
    addresses = ident.get("proxy_addresses", [])
    if (header or ident.get("proxy_email_header")) and not addresses:
        raise fail("identity", "proxy_header needs proxy_addresses: the addresses the proxy connects from")
    for a in addresses:
        try:
            ipaddress.ip_network(str(a), strict=False)
        except ValueError:
            raise fail("identity", f"proxy_addresses: {a!r} is not an IP address or network") from None
    hours = ident.get("session_hours", 12)
    if not isinstance(hours, int | float) or not 0 < hours <= 24 * 30:
        raise fail("identity", f"session_hours must be a number of hours from 0 to 720, got {hours!r}")
    audit = data.get("audit", {}).get("readers", [ANYONE]) if isinstance(data.get("audit"), dict) else [ANYONE]
    return Rules(
        source=where,
        session_hours=float(hours),
        proxy_header=str(header),
        proxy_email_header=str(ident.get("proxy_email_header", "")),
        proxy_addresses=tuple(str(a) for a in addresses),
        roles=roles,
        rules=tuple(rules),
        default=default,
        audit=tuple(_groups(audit, roles, lambda m: fail("audit", m))),
    )


def _table(data: dict[str, Any], name: str, fail: Any) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise fail(name, f"[{name}] must be a table")
    return value


def _roles(raw: dict[str, Any], fail: Any) -> dict[str, frozenset[str]]:
    roles = {}
    for role, people in raw.items():
        if not isinstance(people, list) or not all(isinstance(p, str) and p for p in people):
            raise fail("roles", f'role {role!r} must list people\'s names, e.g. {role} = ["ana"]')
        roles[role] = frozenset(people)
    return roles


def _groups(value: Any, roles: dict[str, frozenset[str]], fail: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise fail('must list roles or people, e.g. ["lead"] (or ["*"] for anyone signed in)')
    return list(value)


def _rule(raw: Any, line: int, roles: dict[str, frozenset[str]], *, fail: Any) -> Rule:
    if not isinstance(raw, dict):
        raise fail("a rule must be a table")
    unknown = set(raw) - RULE_KEYS
    if unknown:
        raise fail(f"unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(RULE_KEYS))})")
    who = tuple(_groups(raw.get("who", [ANYONE]), roles, fail))
    for group in who:
        if group != ANYONE and group not in roles and not _looks_like_person(group, roles):
            raise fail(f"who: {group!r} is no role in [roles]")
    approvers = raw.get("approvers", 1)
    if not isinstance(approvers, int) or isinstance(approvers, bool) or not 1 <= approvers <= 10:
        raise fail(f"approvers must be a whole number from 1 to 10, got {approvers!r}")
    expire = _span(raw.get("expire_after"), fail)
    then = raw.get("then", "")
    if expire is not None and then not in ("escalate", "deny"):
        raise fail('expire_after needs then = "escalate" or then = "deny"')
    if then and expire is None:
        raise fail("then needs expire_after (how long an item may wait)")
    escalate_to = tuple(_groups(raw["escalate_to"], roles, fail)) if "escalate_to" in raw else ()
    if then == "escalate" and not escalate_to:
        raise fail('then = "escalate" needs escalate_to (the roles or people who see the item next)')
    when_text = raw.get("when", "")
    if not isinstance(when_text, str):
        raise fail('when must be a string, e.g. when = "amount > 500"')
    return Rule(
        line=line,
        tool=str(raw.get("tool", ANYONE)),
        agent=str(raw.get("agent", ANYONE)),
        when=_condition(when_text, fail),
        when_text=when_text,
        who=who,
        approvers=approvers,
        expire_after=expire,
        then=str(then),
        escalate_to=escalate_to,
        message=str(raw.get("message", "")) or "No one decided in time: the request was denied.",
    )


def _looks_like_person(group: str, roles: dict[str, frozenset[str]]) -> bool:
    return "@" in group or any(group in people for people in roles.values())


def _condition(text: str, fail: Any) -> tuple[Term, ...]:
    if not text.strip():
        return ()
    terms = []
    for part in re.split(r"\s+and\s+", text.strip()):
        m = TERM.match(part)
        if m is None:
            raise fail(f"when: cannot read {part!r}: write field op value (ops: > >= < <= == != in), joined by and")
        name, op, literal = m.group(1), m.group(2).strip(), m.group(3)
        try:
            value = json.loads(literal)
        except ValueError:
            raise fail(f'when: {literal!r} is not a JSON value (strings in double quotes: "EUR")') from None
        if op == "in" and not isinstance(value, list):
            raise fail(f'when: in takes a list, e.g. {name} in ["a", "b"]')
        terms.append(Term(tuple(name.split(".")), op, value))
    return tuple(terms)


def _span(value: Any, fail: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    m = SPAN.match(str(value))
    if m is None:
        raise fail(f'expire_after must be a time like "90s", "30m", "4h" or "2d", got {value!r}')
    return float(m.group(1)) * SECONDS[m.group(2)]


def _table_lines(text: str) -> dict[str, int]:
    """Where each table starts: ``rule#0``, ``rule#1`` ... and the named ones (for error messages)."""
    found: dict[str, int] = {}
    count = 0
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if re.match(r"^\[\[\s*rule\s*\]\]", stripped):
            found[f"rule#{count}"] = n
            count += 1
        elif m := re.match(r"^\[\s*([A-Za-z_]+)\s*\]", stripped):
            found.setdefault(m.group(1), n)
    return found
