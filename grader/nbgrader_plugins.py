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
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor, SaveAutoGrades


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


_KEEP_MIME = ("text/plain", "image/png")
HELD = "jaxcourse_held"  # cell metadata: the reason an exercise's points are held


def _clean_text(value, limit: int = 100_000) -> str:
    text = "".join(value) if isinstance(value, list) else value
    return text[:limit] if isinstance(text, str) else ""


def sanitize_outputs(outputs, limit: int = 100_000) -> list[dict]:
    """Outputs that came back from a sandbox, rebuilt from their safe parts only.

    The sandbox is untrusted: keep streams, plain text, PNG images and errors,
    drop HTML, JavaScript, SVG and anything malformed (an instructor opens these
    notebooks in the formgrader), and cap every text.
    """
    from functools import partial

    from nbformat import v4

    _clean = partial(_clean_text, limit=limit)
    clean = []
    for out in outputs if isinstance(outputs, list) else []:
        if not isinstance(out, dict):
            continue
        kind = out.get("output_type")
        if kind == "stream" and out.get("name") in ("stdout", "stderr"):
            clean.append(v4.new_output("stream", name=out["name"], text=_clean(out.get("text"))))
        elif kind in ("display_data", "execute_result") and isinstance(out.get("data"), dict):
            data = {m: _clean(out["data"][m]) for m in _KEEP_MIME
                    if isinstance(out["data"].get(m), (str, list))}
            if data:
                clean.append(v4.new_output("display_data", data=data))
        elif kind == "error":
            tb = out.get("traceback")
            clean.append(v4.new_output(
                "error", ename=_clean(out.get("ename"))[:200] or "Error",
                evalue=_clean(out.get("evalue"))[:5000],
                traceback=[_clean(t)[:5000] for t in (tb if isinstance(tb, list) else [])][:50]))
    return clean


class TrustedReplay(NbGraderPreprocessor):
    """Puts the pipeline's judged results into the notebook, in place of executing it.

    ``python -m autograder grade`` runs each submission in a sandbox and judges the
    values it returns outside (grader.pipeline). This preprocessor, configured
    only for those runs (the ``JAXCOURSE_BUNDLES`` variable), reads the bundle of the
    submission: the sandbox's outputs for ordinary cells, and for each graded test
    cell the trusted verdict: passing test cells keep their printed output, failing
    ones end with an error that carries the verdict's message. nbgrader's own
    SaveAutoGrades then scores the cells as usual.
    """

    def preprocess(self, nb, resources):
        import json
        import os
        from pathlib import Path

        from nbformat import v4

        info = resources["nbgrader"]
        path = (Path(os.environ["JAXCOURSE_BUNDLES"]) / info["student"]
                / f"{info['notebook']}.json")
        bundle = json.loads(path.read_text())
        from grader.config import Grading

        limit = Grading(config=self.config).text_limit
        outputs, verdicts = bundle["outputs"], bundle["verdicts"]
        held_solutions = bundle.get("held_solutions", {})
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            outs = sanitize_outputs(outputs[index] if index < len(outputs) else [], limit)
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if utils.is_solution(cell) and gid in held_solutions:
                cell.metadata[HELD] = held_solutions[gid]
            if utils.is_grade(cell) and not utils.is_solution(cell):
                verdict = verdicts.get(gid, {"passed": False,
                                             "message": "this test cell was not graded"})
                visible = [o.evalue for o in outs if o.output_type == "error"]
                outs = [o for o in outs if o.output_type == "stream" and o.name == "stdout"]
                if verdict.get("held"):
                    cell.metadata[HELD] = verdict["message"]
                    outs.append(v4.new_output("error", ename="HeldForReview",
                                              evalue=verdict["message"],
                                              traceback=[f"HeldForReview: {verdict['message']}"]))
                elif not verdict["passed"]:
                    message = verdict["message"]
                    if visible and visible[0].strip():
                        message += ("\n\nThe visible test in your notebook said:\n"
                                    + visible[0].strip()[:3000])
                    outs.append(v4.new_output("error", ename="CheckFailure", evalue=message,
                                              traceback=[f"CheckFailure: {message}"]))
            cell.outputs = outs
            cell.execution_count = None
        return nb, resources


class SaveTrustedGrades(SaveAutoGrades):
    """nbgrader's SaveAutoGrades, plus exercises held for review by the tampering policy.

    A held test cell scores 0 automatically and is marked as needing manual grading, so
    the Formgrader lists it; the reason is the auto-comment of the solution cell. A
    manual score, once given, counts as usual.
    """

    def _add_score(self, cell, resources) -> None:
        super()._add_score(cell, resources)
        if cell.metadata.get(HELD):
            grade = self.gradebook.find_grade(cell.metadata["nbgrader"]["grade_id"],
                                              self.notebook_id, self.assignment_id,
                                              self.student_id)
            grade.auto_score = 0.0
            grade.needs_manual_grade = True
            self.gradebook.db.commit()

    def _add_comment(self, cell, resources) -> None:
        super()._add_comment(cell, resources)
        if cell.metadata.get(HELD):
            comment = self.gradebook.find_comment(cell.metadata["nbgrader"]["grade_id"],
                                                  self.notebook_id, self.assignment_id,
                                                  self.student_id)
            comment.auto_comment = f"Held for review: {cell.metadata[HELD]}"[:5000]
            self.gradebook.db.commit()
