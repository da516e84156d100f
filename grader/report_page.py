"""The instructor's report as one self-contained HTML page (``grader.report``).

Plots are drawn with matplotlib (a ``Figure`` of its own, no pyplot state) and put in
the page as base64 PNGs without the PNG's software tag; the page has no script and
no external URL, so it opens offline and prints as it shows. Every text that came
from a gradebook or a feedback message is escaped.
"""
from __future__ import annotations

import datetime
import html
import statistics
from typing import TYPE_CHECKING

from grader.ledger import REASONS

if TYPE_CHECKING:
    from grader.report import ExerciseStat, Facts

_TIME_BARS = 40  # up to this many submissions, one bar each; more: a histogram
_CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:80em;color:#222}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.2em .5em;
text-align:left;vertical-align:top}th{background:#f2f2f2}
.row{display:flex;gap:2em;align-items:flex-start}dl{display:grid;grid-template-columns:auto auto;
gap:.1em 1em}dt{font-weight:600}dd{margin:0}pre{white-space:pre-wrap;margin:0;max-width:50em}
.notes li{color:#8a4b00}article{border-top:1px solid #ddd;margin-top:1em}small{color:#666}"""
DISCRIMINATION = ("Discrimination: Pearson's r of the exercise's score with the rest of the "
                  "module's; near 1 it separates students as the module does, near 0 or "
                  "below it does not.")


def number(x: float | None, fmt: str = ".2f") -> str:
    """``x`` formatted, or "" for None (an empty cell, never a 0)."""
    return "" if x is None else format(x, fmt)


def _percent(share: float | None) -> str:
    return "" if share is None else f"{100 * share:.0f} %"


# ---------------------------------------------------------------- plots

def _png(fig) -> str:
    import base64
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _histogram_png(st: ExerciseStat) -> str:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(4.2, 2.6), layout="constrained")
    ax = fig.add_subplot()
    labels, counts = zip(*st.histogram)
    ax.bar(range(len(counts)), counts, color=["#c9504a"] * (len(counts) - 1) + ["#3f8f4f"])
    ax.set_xticks(range(len(counts)), labels, fontsize=8)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(title=f"{st.exercise.name}: scores of {len(st.scores)} student(s)",
           xlabel="score (points)", ylabel="students")
    return _png(fig)


def _times_png(seconds: dict[str, float]) -> str:
    from matplotlib.figure import Figure

    timed = sorted(((t, s) for s, t in seconds.items()), reverse=True)
    fig = Figure(figsize=(6, 1.2 + 0.22 * min(len(timed), _TIME_BARS)), layout="constrained")
    ax = fig.add_subplot()
    if len(timed) <= _TIME_BARS:
        ax.barh([s for _, s in timed][::-1], [t for t, _ in timed][::-1], color="#4a76a8")
        ax.set(xlabel="seconds", ylabel="submission")
    else:
        ax.hist([t for t, _ in timed], bins=20, color="#4a76a8")
        ax.set(xlabel="seconds", ylabel="submissions")
    ax.set_title(f"grading time of {len(timed)} submission(s)")
    return _png(fig)


def _colour(fraction: float) -> str:
    """A score's colour (red 0 to green full marks), light enough to read text on."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    r, g, b, _ = colormaps["RdYlGn"](min(1.0, max(0.0, fraction)))
    return to_hex((0.55 * r + 0.45, 0.55 * g + 0.45, 0.55 * b + 0.45))


# ---------------------------------------------------------------- sections

def _cell(tag: str, value) -> str:
    """A table cell; text is escaped, ``("raw", html[, attributes])`` is not."""
    if isinstance(value, tuple):
        return f"<{tag}{value[2] if len(value) > 2 else ''}>{value[1]}</{tag}>"
    return f"<{tag}>{html.escape(str(value))}</{tag}>"


def _table(header: list[str], rows: list[list], cls: str) -> str:
    head = "".join(_cell("th", h) for h in header)
    body = "".join("<tr>" + "".join(_cell("td", c) for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _section(key: str, title: str, body: str) -> str:
    return f'<section id="{key}"><h2>{title}</h2>{body}</section>'


def _summary(stats: list[ExerciseStat]) -> str:
    rows = [[("raw", f'<a href="#{html.escape(st.exercise.grade_id)}">'
                     f"{html.escape(st.exercise.name)}</a>"),
             f"{st.exercise.max_score:g}", len(st.scores), number(st.mean), number(st.median),
             _percent(st.full_share), number(st.discrimination) or st.undefined]
            for st in stats]
    return _table(["exercise", "points", "students", "mean", "median", "full marks",
                   "discrimination"], rows, "summary") + f"<p><small>{DISCRIMINATION}</small></p>"


def _exercise(st: ExerciseStat) -> str:
    ex = st.exercise
    facts = [("points", f"{ex.max_score:g}"), ("students", str(len(st.scores))),
             ("mean", number(st.mean)), ("median", number(st.median)),
             ("full marks", _percent(st.full_share)),
             ("discrimination", number(st.discrimination) or st.undefined)]
    dl = "".join(f"<dt>{k}</dt><dd>{html.escape(v)}</dd>" for k, v in facts)
    img = (f'<img alt="score histogram of {html.escape(ex.name)}" src="{_histogram_png(st)}">'
           if st.scores else "")
    if st.items:
        items = _table(["rubric item not met", "students", "most common feedback message"],
                       [[i.requirement, f"{i.students} ({_percent(i.share)})",
                         ("raw", f"<pre>{html.escape(i.message)}</pre>"
                                 f"<small>{i.message_students} student(s)</small>")]
                        for i in st.items], "items")
    else:
        items = "<p>No rubric item failed.</p>" if st.scores else ""
    return (f'<article id="{html.escape(ex.grade_id)}"><h3>{html.escape(ex.name)} '
            f"<small>{html.escape(ex.grade_id)}</small></h3>"
            f'<div class="row">{img}<dl>{dl}</dl></div>{items}</article>')


def _matrix(facts: Facts) -> str:
    rows = []
    for student in sorted(facts.scores):
        scores, entry = facts.scores[student], facts.ledger.get(student, {})
        cells = [("raw", f"{scores.get(ex.grade_id, 0.0):g}", ' style="background:'
                  f'{_colour(scores.get(ex.grade_id, 0.0) / (ex.max_score or 1))}"')
                 for ex in facts.exercises]
        rows.append([student, *cells, f"{sum(scores.values()):g}", entry.get("reason", ""),
                     number(entry.get("seconds"), ".1f")])
    if not rows:
        return "<p>No scored submission.</p>"
    return _table(["student", *[ex.name for ex in facts.exercises], "total", "attention",
                   "grading s"], rows, "matrix")


def _attention(ledger: dict[str, dict]) -> str:
    rows = [[s, e.get("reason", ""), REASONS.get(e.get("reason", ""), ""), e.get("detail", ""),
             "no score" if e.get("score") is None else f"{e['score']:g}"]
            for s, e in sorted(ledger.items()) if e.get("status") != "graded"]
    if not rows:
        return "<p>None.</p>"
    return _table(["student", "reason", "what it means", "detail", "score"], rows, "attention")


def _timing(ledger: dict[str, dict]) -> str:
    seconds = {s: float(e["seconds"]) for s, e in ledger.items() if e.get("seconds")}
    if not seconds:
        return "<p>No grading times: the ledger records none for this module.</p>"
    slowest = max(seconds, key=seconds.get)
    summary = (f"{len(seconds)} submission(s) graded in {sum(seconds.values()):.1f} s of "
               f"sandbox time; median {statistics.median(seconds.values()):.1f} s, slowest "
               f"{slowest} ({seconds[slowest]:.1f} s). Each submission's time is in the "
               "matrix above and in the students CSV.")
    return (f'<img alt="grading time per submission" src="{_times_png(seconds)}">'
            f"<p>{html.escape(summary)}</p>")


def render(facts: Facts, stats: list[ExerciseStat], notes: list[str]) -> str:
    """The whole page: notes first (what to know before the numbers), then each part."""
    title = f"{html.escape(facts.module)}: instructor analytics"
    attention = sum(e.get("status") != "graded" for e in facts.ledger.values())
    parts = [f"<h1>{title}</h1><p><small>{len(facts.scores)} scored submission(s), "
             f"{attention} needing attention, "
             f"{sum(e.max_score for e in facts.exercises):g} points; generated "
             f"{datetime.datetime.now().isoformat(timespec='seconds')}</small></p>"]
    if notes:
        parts.append(_section("notes", "Notes", '<ul class="notes">' + "".join(
            f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"))
    parts += [_section("summary", "Exercises", _summary(stats)),
              _section("exercises", "Each exercise", "".join(_exercise(st) for st in stats)),
              _section("matrix", "Students &times; exercises", _matrix(facts)),
              _section("attention", "Submissions that need attention", _attention(facts.ledger)),
              _section("time", "Grading time", _timing(facts.ledger))]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}'
            f"</title><style>{_CSS}</style></head><body>\n" + "\n".join(parts)
            + "\n</body></html>\n")
