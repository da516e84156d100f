"""nbgrader preprocessors that the course's config plugs in.

``NoDisplayCredit`` runs in ``nbgrader autograde``: test cells are scored by their
errors only (see its docstring).

``HideHiddenTests`` runs in ``nbgrader generate_feedback``: it removes the hidden
test region from test cells (nbgrader's own ClearHiddenTests) and replaces the
traceback of a failing test cell by the check's message, because IPython prints
the lines around the failing call, and that call can be a hidden test. The
messages of the autograder's checks say everything a student needs: what failed,
expected against got, the likely cause, the fix and the section to reread.
"""
from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor


class HideHiddenTests(ClearHiddenTests):
    """Feedback without hidden test code: sources and tracebacks of test cells."""

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type == "code" and utils.is_grade(cell):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
        return cell, resources


class NoDisplayCredit(NbGraderPreprocessor):
    """Scores a test cell by its errors only, never by the value it displays.

    nbgrader gives partial credit when a test cell's last expression displays a
    number. The course's test cells are all-or-nothing, and a check may return the
    student's own result: a correct answer that returns a Python float (a loss of
    0.3) must not be scored 0.3 points. So ``execute_result`` outputs are dropped from
    graded test cells before ``SaveAutoGrades`` reads them.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            cell.outputs = [o for o in cell.get("outputs", [])
                            if o.get("output_type") != "execute_result"]
        return cell, resources
