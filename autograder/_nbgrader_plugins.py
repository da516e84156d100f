"""nbgrader preprocessors that the course's config plugs in.

``HideHiddenTests`` runs in ``nbgrader generate_feedback``: it removes the hidden
test region from test cells (nbgrader's own ClearHiddenTests) and replaces the
traceback of a failing test cell by the check's message, because IPython prints
the lines around the failing call, and that call can be a hidden test. The
messages of the autograder's checks say everything a student needs: what failed,
expected against got, the likely cause, the fix and the section to reread.
"""
from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests


class HideHiddenTests(ClearHiddenTests):
    """Feedback without hidden test code: sources and tracebacks of test cells."""

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type == "code" and utils.is_grade(cell):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
        return cell, resources
