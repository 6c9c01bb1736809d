"""Per-student HTML feedback: scores and the checkers' messages, never hidden test source."""
from __future__ import annotations

import html
from pathlib import Path

from .records import Status, SubmissionResult

STYLE = """body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.4rem;
vertical-align:top;text-align:left}.ok{color:#176117}.bad{color:#a11}.todo{color:#555}
pre{white-space:pre-wrap;margin:0;font-family:inherit}"""


def render(result: SubmissionResult) -> str:
    """One page for one student's lesson."""
    student, lesson = html.escape(result.student), html.escape(result.lesson)
    parts = [f"<!doctype html><meta charset='utf-8'><title>{lesson} — {student}</title>",
             f"<style>{STYLE}</style><h1>Feedback: {lesson}</h1><p>Student: {student}</p>"]
    total = maximum = waiting = 0.0
    for notebook in result.notebooks:
        parts.append(f"<h2>{html.escape(notebook.name)}.ipynb</h2>")
        if notebook.status is not Status.GRADED or notebook.reason:
            parts.append(f"<p class='bad'>Status: {html.escape(notebook.status.value)} — "
                         f"{html.escape(notebook.reason)}</p>")
        if notebook.review:
            parts.append("<p class='bad'>Flagged for the instructor's review (graded as usual): "
                         f"{html.escape(notebook.review)}</p>")
        parts.append("<table><tr><th>exercise</th><th>what is checked</th><th>score</th>"
                     "<th>feedback</th></tr>")
        for item in notebook.items:
            maximum += item.points
            if item.ungraded:
                waiting += item.points
                css, shown = "todo", "to be graded by hand"
            else:
                total += item.awarded
                css = "ok" if item.awarded == item.points else "bad"
                shown = f"{item.awarded:g} / {item.points:g}"
                if item.hand_score is not None:
                    shown += " (graded by hand)"
            notes = [text for text in (item.message if item.hand_score is None or not item.manual
                                       else "", item.hand_comment) if text]
            comment = "".join(f"<pre>{html.escape(text)}</pre>" for text in notes)
            parts.append(
                f"<tr><td>{html.escape(item.grade_id)}</td>"
                f"<td>{html.escape(item.docstring or 'written answer')}</td>"
                f"<td class='{css}'>{shown}</td><td>{comment}</td></tr>")
        parts.append("</table>")
    if result.penalty:
        total -= result.penalty
    summary = f"<p><strong>Score: {total:g} / {maximum:g}</strong>"
    if waiting:
        summary += f" — written answers ({waiting:g} points) are still to be graded by hand"
    if result.late is not None:  # late.py: shown whether or not the policy took points
        summary += f"</p><p class='bad'>Late: {html.escape(result.late.describe())}"
    parts.insert(2, summary + "</p>")
    return "\n".join(parts) + "\n"


def write(folder: Path, result: SubmissionResult) -> None:
    """feedback/<student>/<lesson>.html for one result, and the same page as
    feedback/<student>/<lesson>/<notebook>.html for each notebook: where nbgrader's
    ``release_feedback`` takes it from (tools/handback.py)."""
    target = folder / result.student / f"{result.lesson}.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    page = render(result)
    target.write_text(page, encoding="utf-8")
    per_notebook = folder / result.student / result.lesson
    per_notebook.mkdir(exist_ok=True)
    for notebook in result.notebooks:
        (per_notebook / f"{notebook.name}.html").write_text(page, encoding="utf-8")
