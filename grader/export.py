"""nbgrader export plugin: grades.csv with a status column, never a silent 0.

``nbgrader export --exporter=grader.export.StatusCsvExport`` writes the columns
of nbgrader's own CSV export plus ``status`` (graded, needs_attention, missing) and
``reason``, and from the grading ledger ``isolation`` (the sandbox and limits it ran
under), ``peak_memory_mb`` and ``stopped_by`` (the limit that stopped it, with the
numbers). A submission that needs attention and could not be graded (malformed,
a grader failure) has an empty score, not 0; one that was graded but needs a look
(a cell that hung or crashed, tampering suspected) keeps its score beside the reason.
"""
from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Unicode

from grader.ledger import read_ledger

COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
           "email", "raw_score", "late_submission_penalty", "score", "max_score",
           "status", "reason", "isolation", "peak_memory_mb", "stopped_by"]


class StatusCsvExport(ExportPlugin):
    """CSV export with the grading ledger's status and reason for every row."""

    course_root = Unicode(".", help="course folder that holds autograded/.grading").tag(config=True)

    def export(self, gradebook) -> None:
        dest = self.to or "grades.csv"
        wanted_a = {str(a) for a in self.assignment}
        wanted_s = {str(s) for s in self.student}
        rows = []
        for assignment in gradebook.assignments:
            if wanted_a and assignment.name not in wanted_a:
                continue
            ledger = read_ledger(Path(self.course_root), assignment.name)
            students = {s.id: s for s in gradebook.students}
            for sid in sorted(set(students) | set(ledger)):
                if wanted_s and sid not in wanted_s:
                    continue
                student = students.get(sid)
                row = dict.fromkeys(COLUMNS, "")
                row.update(assignment=assignment.name, duedate=assignment.duedate or "",
                           student_id=sid, max_score=assignment.max_score)
                if student is not None:
                    row.update(last_name=student.last_name or "",
                               first_name=student.first_name or "", email=student.email or "")
                entry = ledger.get(sid)
                if entry:
                    peak = entry.get("peak_memory_mb")
                    row.update(isolation=entry.get("isolation", ""),
                               peak_memory_mb=f"{peak:.0f}" if peak else "",
                               stopped_by=entry.get("stopped_by", ""))
                if entry and entry["status"] != "graded" and entry.get("score") is None:
                    row.update(status="needs_attention", reason=entry["reason"])
                    rows.append(row)
                    continue
                try:
                    sub = gradebook.find_submission(assignment.name, sid)
                except MissingEntry:
                    row.update(status="missing", reason="no submission", raw_score=0.0,
                               late_submission_penalty=0.0, score=0.0)
                else:
                    penalty = sub.late_submission_penalty or 0.0
                    row.update(timestamp=sub.timestamp or "", raw_score=sub.score,
                               late_submission_penalty=penalty,
                               score=max(0.0, sub.score - penalty),
                               status="graded" if not entry or entry["status"] == "graded"
                               else "needs_attention",
                               reason=entry["reason"] if entry else "")
                rows.append(row)
        with open(dest, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        self.log.info("Exported %d row(s) to %s", len(rows), dest)
