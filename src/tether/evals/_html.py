"""A report as one self-contained HTML page: inline CSS, inline SVG plots, no scripts."""

from __future__ import annotations

import time
from html import escape
from typing import TYPE_CHECKING

from . import _svg
from ._render import summary_lines

if TYPE_CHECKING:
    from .results import ReportView, TrialResult

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em}
.summary{background:#f5f5f5;padding:.8em 1em;border-radius:6px;line-height:1.6}
.plots{display:flex;flex-wrap:wrap;gap:12px}
table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#fafafa}.pass{color:#2e7d32;font-weight:bold}.fail{color:#c62828;font-weight:bold}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td:first-child,td:nth-child(2),td:nth-child(3){white-space:nowrap}
details{margin:.2em 0}pre{white-space:pre-wrap;background:#fafafa;padding:.4em;margin:.2em 0}
"""


def page(report: ReportView) -> str:
    """The whole page as a string."""
    s = report.summary()
    title = f"tether eval: {report.name}" + (f" ({report.label})" if report.label else "")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(report.created_at))
    body = [
        f"<h1>{escape(title)}</h1>",
        f"<p>{s.cases} cases, {s.trials} trials, {escape(when)}</p>",
        '<div class="summary">' + "<br>".join(escape(line) for line in summary_lines(s)) + "</div>",
        "<h2>Plots</h2>",
        '<div class="plots">' + "".join(_plots(report)) + "</div>",
        "<h2>Cases</h2>",
        _cases_table(report),
        "<h2>Trials</h2>",
        *(_trial(r) for r in report.results),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _plots(report: ReportView) -> list[str]:
    cases = report.cases()
    s = report.summary()
    plots = [_svg.bars([(c.case_id, c.pass_rate) for c in cases], title="pass rate per case")]
    if s.by_tag:
        plots.append(_svg.bars(list(s.by_tag.items()), title="accuracy per tag"))
    seconds = [r.seconds for r in report.results]
    plots.append(_svg.histogram(seconds, title="latency per trial", xlabel="seconds"))
    plots.append(
        _svg.histogram([float(r.replies) for r in report.results], title="model replies per trial", xlabel="replies")
    )
    if any(r.tokens for r in report.results):
        plots.append(
            _svg.histogram([float(r.tokens) for r in report.results], title="tokens per trial", xlabel="tokens")
        )
    return plots


def _cases_table(report: ReportView) -> str:
    k = max(report.summary().pass_at, default=1)
    head = ["case", "tags", "pass", f"pass@{k}", "score", "replies", "tokens", "seconds", "why not"]
    rows = []
    for c in report.cases():
        ok = "pass" if c.passes == c.trials else "fail"
        cells = [
            f"<td>{escape(c.case_id)}</td>",
            f"<td>{escape(', '.join(c.tags))}</td>",
            f'<td class="{ok}">{c.passes}/{c.trials}</td>',
            f'<td class="num">{c.pass_at.get(k, 0.0):.2f}</td>',
            f'<td class="num">{c.score:.2f} ± {c.score_spread:.2f}</td>',
            f'<td class="num">{c.replies:.1f}</td>',
            f'<td class="num">{c.tokens:.0f}</td>',
            f'<td class="num">{c.seconds:.2f}</td>',
            f"<td>{escape('; '.join(c.reasons[:2]))}</td>",
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _trial(r: TrialResult) -> str:
    ok = '<span class="pass">PASS</span>' if r.passed else '<span class="fail">FAIL</span>'
    grades = "".join(
        f"<li>{'✓' if g.passed else '✗'} {escape(g.grader)}: {escape(g.reason or 'ok')}</li>" for g in r.grades
    )
    error = f"<p>error: {escape(r.error)}</p>" if r.error else ""
    return (
        f"<details><summary>{ok} {escape(r.case_id)} #{r.trial} · {escape(r.status)} · {r.replies} replies · "
        f"{r.seconds:.2f} s</summary><p>run <code>{escape(r.run_id)}</code></p>"
        f"<pre>{escape(r.output or '(no answer)')}</pre><ul>{grades}</ul>{error}</details>"
    )
