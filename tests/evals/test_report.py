"""Reports: valid JSON that loads back, a self-contained HTML page with plots, a table, comparisons."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tether import UserError
from tether.evals import Grade, Report, TrialResult, compare, load_report


def trial(case: str, t: int, passed: bool, **kw: object) -> TrialResult:
    grades = (Grade(passed, reason="" if passed else f"{case} was wrong", grader="exact"),)
    return TrialResult(
        case,
        t,
        f"eval:e:{case}:{t}",
        passed,
        float(passed),
        "finished",
        "out <b>&",
        grades,
        replies=2,
        tool_calls=1,
        input_tokens=10,
        output_tokens=5,
        seconds=0.1 + t,
        **kw,
    )  # type: ignore[arg-type]


REPORT = Report(
    "demo",
    [
        trial("refund", 0, True, tags=("seed",)),
        trial("refund", 1, False, tags=("seed",)),
        trial("weather", 0, True, tags=("seed", "weather")),
        trial("weather", 1, True, tags=("seed", "weather")),
    ],
    label="scripted",
)


def test_json_is_valid_and_loads_back(tmp_path: Path) -> None:
    path = REPORT.save(tmp_path / "r.json")
    data = json.loads(path.read_text())
    assert data["summary"]["accuracy"] == 0.75 and data["summary"]["trials"] == 4
    assert data["cases"][0]["case_id"] == "refund" and data["cases"][0]["passes"] == 1
    back = load_report(path)
    assert back.to_dict()["results"] == REPORT.to_dict()["results"] and back.label == "scripted"


def test_summary_figures() -> None:
    s = REPORT.summary()
    assert s.cases == 2 and s.pass_at == {1: 0.75, 2: 1.0}
    assert s.by_tag == {"seed": 0.75, "weather": 1.0}
    assert (s.input_tokens, s.output_tokens) == (40, 20) and s.cost is None
    assert s.seconds_p50 == pytest.approx(0.6) and s.replies == 2.0


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") or ((value or "").startswith(("http:", "https:")) and name != "xmlns"):
                self.errors.append(f"external reference {name}={value}")
        if tag not in ("meta", "br"):
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> (open: {self.stack[-3:]})")
        else:
            self.stack.pop()


def test_html_is_one_balanced_self_contained_page_with_svg_plots(tmp_path: Path) -> None:
    page = REPORT.save(tmp_path / "r.html").read_text()
    checker = _Checker()
    checker.feed(page)
    assert checker.errors == [] and checker.stack == []
    assert "script" not in checker.tags and "link" not in checker.tags and "img" not in checker.tags
    assert checker.tags.count("svg") >= 3
    assert "out &lt;b&gt;&amp;" in page and "<b>&" not in page  # model text is escaped
    assert "refund was wrong" in page and "pass rate per case" in page


def test_table_lists_each_case_and_the_summary() -> None:
    text = REPORT.table()
    assert "refund" in text and "1/2" in text and "refund was wrong" in text
    assert "accuracy 75%" in text and "pass@2 1.00" in text and "by tag: seed 75%" in text


def test_save_refuses_an_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"use \.json, \.html or \.txt"):
        REPORT.save(tmp_path / "r.pdf")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(UserError, match="not a tether eval report"):
        load_report(tmp_path / "bad.json")


def test_compare_names_regressions_improvements_and_new_cases() -> None:
    after = Report(
        "demo",
        [
            trial("refund", 0, True),
            trial("refund", 1, True),
            trial("weather", 0, False),
            trial("weather", 1, True),
            trial("new", 0, True),
        ],
    )
    result = compare(REPORT, after)
    assert result.regressed == ("weather",) and result.improved == ("refund",)
    assert result.added == ("new",) and result.removed == ()
    text = result.table()
    assert "REGRESSED  weather: 100% -> 50%" in text and "improved   refund: 50% -> 100%" in text
    assert compare(REPORT, REPORT).table().endswith("no case changed")


def test_a_lone_surrogate_in_a_result_writes_every_format(tmp_path: Path) -> None:
    # Issue 25: one lone surrogate from a model or a tool crashed the HTML report (UnicodeEncodeError).
    bad = trial("refund", 0, False)
    bad = type(bad).from_dict({**bad.to_dict(), "output": "refunded \ud800 twice"})
    hostile = Report("hostile", [bad, trial("weather", 0, True)], label="x")
    for suffix in (".html", ".json", ".txt"):
        text = hostile.save(tmp_path / f"r{suffix}").read_text(encoding="utf-8")
        assert "refunded \ufffd twice" in text or suffix == ".txt"
    assert "\ufffd" in hostile.html()
    assert load_report(tmp_path / "r.json").results[0].output == "refunded \ufffd twice"
