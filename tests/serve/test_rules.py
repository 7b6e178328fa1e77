"""The rules file: read once at start, every mistake named with its file and line, conditions that fail closed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tether.exceptions import UserError
from tether.serve._rules import load_rules

from .conftest import ROOT

GOOD = """\
[identity]
session_hours = 8

[roles]
lead = ["ana"]
clerk = ["bo", "cy"]

[[rule]]
tool = "issue_refund"
when = "amount > 500 and currency == \\"EUR\\""
who = ["lead"]
approvers = 2

[[rule]]
agent = "billing*"
tool = "issue_*"
when = "order.country in [\\"FR\\", \\"DE\\"]"
who = ["clerk"]
expire_after = "30m"
then = "escalate"
escalate_to = ["lead"]

[default]
who = ["*"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    return path


def test_the_first_matching_rule_applies_and_the_default_catches_the_rest(tmp_path: Path) -> None:
    rules = load_rules(write(tmp_path, GOOD))
    assert rules.session_hours == 8
    big = rules.rule_for("support", "issue_refund", {"amount": 900, "currency": "EUR"})
    assert (big.line, big.who, big.approvers) == (8, ("lead",), 2)
    assert rules.rule_for("support", "issue_refund", {"amount": 90, "currency": "EUR"}) is rules.default
    french = rules.rule_for("billing-eu", "issue_credit", {"order": {"country": "FR"}})
    assert (french.line, french.expire_after, french.escalate_to) == (14, 1800.0, ("lead",))
    assert rules.rule_for("support", "issue_credit", {"order": {"country": "FR"}}) is rules.default  # other agent
    assert rules.may_decide("ana", big, escalated=False) and not rules.may_decide("bo", big, escalated=False)
    assert not rules.may_decide("ana", french, escalated=False) and rules.may_decide("ana", french, escalated=True)


@pytest.mark.parametrize(
    "args",
    [{"currency": "EUR"}, {"amount": "9999", "currency": "EUR"}, {"amount": None, "currency": "EUR"}, "not json"],
)
def test_a_condition_that_cannot_be_evaluated_counts_as_true(tmp_path: Path, args: object) -> None:
    rules = load_rules(write(tmp_path, GOOD))
    assert rules.rule_for("support", "issue_refund", args).who == ("lead",)  # the stricter rule, not the default


@pytest.mark.parametrize(
    ("change", "line", "says"),
    [
        (('who = ["lead"]', 'who = ["leed"]'), 8, "'leed' is no role"),
        (("approvers = 2", "approvers = 0"), 8, "approvers must be a whole number from 1 to 10"),
        (("approvers = 2", "aprovers = 2"), 8, "unknown key 'aprovers'"),
        (('when = "amount > 500', 'when = "amount >> 500'), 8, "'> 500' is not a JSON value"),
        (('when = "amount > 500', 'when = "amount is big'), 8, "cannot read 'amount is big'"),
        (('expire_after = "30m"', 'expire_after = "soon"'), 14, "expire_after must be a time"),
        (('then = "escalate"', 'then = "shrug"'), 14, 'then = "escalate" or then = "deny"'),
        (('escalate_to = ["lead"]\n', ""), 14, "needs escalate_to"),
        (("session_hours = 8", "session_hours = -1"), 1, "session_hours"),
        (('clerk = ["bo", "cy"]', 'clerk = "bo"'), 4, "must list people's names"),
        (("[default]", "[defaults]"), 1, "unknown section 'defaults'"),
    ],
)
def test_a_mistake_names_the_file_and_the_line(tmp_path: Path, change: tuple[str, str], line: int, says: str) -> None:
    assert change[0] in GOOD
    path = write(tmp_path, GOOD.replace(change[0], change[1], 1))
    with pytest.raises(UserError) as caught:
        load_rules(path)
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert says in str(caught.value)


def test_bad_toml_and_a_proxy_without_addresses_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"rules.toml: not valid TOML: .*line 3"):
        load_rules(write(tmp_path, '[roles]\nlead = ["ana"]\nclerk = bo\n'))
    with pytest.raises(UserError, match=r"rules.toml:1: proxy_header needs proxy_addresses"):
        load_rules(write(tmp_path, '[identity]\nproxy_header = "X-Forwarded-User"\n'))
    with pytest.raises(UserError, match="not an IP address"):
        load_rules(write(tmp_path, '[identity]\nproxy_addresses = ["proxy.local"]\n'))


def test_tether_serve_refuses_a_bad_rules_file_in_one_line_and_rules_without_people(tmp_path: Path) -> None:
    def serve(rules: str) -> subprocess.CompletedProcess[str]:
        write(tmp_path, rules)
        return subprocess.run(
            [sys.executable, "-m", "tether", "serve", "tests.serve.apps:support", "--rules", "rules.toml",
             "--store", "sqlite:///.tether/runs.db", "--port", "1"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
            env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin"},
        )  # fmt: skip

    bad = serve(GOOD.replace('who = ["lead"]', 'who = ["leed"]'))
    assert bad.returncode == 2 and bad.stderr == "error: rules.toml:8: who: 'leed' is no role in [roles]\n"
    nobody = serve(GOOD)  # rules, but no accounts and no proxy: names anyone could type
    assert nobody.returncode == 2 and "nobody can prove who they are" in nobody.stderr
    assert nobody.stderr.count("\n") == 1


@pytest.mark.parametrize("doc", ["README.md", "docs/serve.md"])
def test_the_rules_files_the_docs_show_are_valid(tmp_path: Path, doc: str) -> None:
    blocks = [b.split("```")[0] for b in (ROOT / doc).read_text().split("```toml\n")[1:]]
    assert blocks
    for block in blocks:
        load_rules(write(tmp_path, block))


def test_a_default_that_names_roles_needs_people_too(tmp_path: Path) -> None:
    from tether.serve._judge import People

    rules = load_rules(write(tmp_path, '[roles]\nlead = ["ana"]\n[default]\nwho = ["lead"]\n'))
    with pytest.raises(UserError, match="nobody can prove who they are"):
        People(tmp_path, rules, b"k" * 32)
    with_proxy = load_rules(
        write(tmp_path, '[identity]\nproxy_email_header = "X-Forwarded-Email"\nproxy_addresses = ["10.0.0.5"]\n')
    )
    assert People(tmp_path, with_proxy, b"k" * 32).on  # an e-mail header alone is a proxy too
