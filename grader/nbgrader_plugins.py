"""nbgrader preprocessors that the course's config plugs in.

``NoDisplayCredit`` runs in ``nbgrader autograde``: test cells are scored by their
errors only (see its docstring).

``HideHiddenTests`` runs in ``nbgrader generate_feedback``: it removes the hidden
test region from test cells (nbgrader's own ClearHiddenTests), replaces the
traceback of a failing test cell by the check's message, because IPython prints
the lines around the failing call, and that call can be a hidden test, and drops
every other output (see its docstring). The messages of the autograder's checks say
everything a student needs: what failed, expected against got, the likely cause, the
fix and the section to reread.
"""
from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor, SaveAutoGrades


class HideHiddenTests(ClearHiddenTests):
    """Feedback that holds no hidden test and nothing the student's code printed.

    - The hidden region is removed from test cells (nbgrader's ClearHiddenTests), and
      only from them: the marker text in a student's own cell is data, not a marker
      (nbgrader's preprocessor stops the whole feedback run on it).
    - A test cell keeps only its error, reduced to its message (IPython prints the
      lines around the failing call, and that call can be a hidden test). In a graded
      batch that message is the trusted judge's (``TrustedReplay``).
    - Every other output is dropped: the student's code ran beside the hidden tests
      and the grader's seed, and any cell after the first test cell could print what
      it read there. The student's own notebook keeps their outputs; the instructor's
      autograded copy keeps them too.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code":
            return cell, resources
        if utils.is_grade(cell) and not utils.is_solution(cell):
            cell, resources = super().preprocess_cell(cell, resources, cell_index)
            cell.outputs = [out for out in cell.get("outputs", [])
                            if out.get("output_type") == "error"]
            for out in cell.outputs:
                out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
        else:
            cell.outputs = []
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
    submission: the sandbox's outputs for ordinary cells (the instructor's copy; the
    feedback drops them, see ``HideHiddenTests``), and for each graded test cell the
    trusted verdict alone: nothing the sandbox printed there, and a failing cell ends
    with an error that carries the verdict's message, with any line of a hidden test
    and the grader's seed cut out of it (:func:`redact`). nbgrader's own
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
        secrets = _secrets(bundle)
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
                message = redact(str(verdict.get("message", "")), secrets)
                outs = []
                if verdict.get("held"):
                    cell.metadata[HELD] = message
                    outs.append(v4.new_output("error", ename="HeldForReview", evalue=message,
                                              traceback=[f"HeldForReview: {message}"]))
                elif not verdict["passed"]:
                    outs.append(v4.new_output("error", ename="CheckFailure", evalue=message,
                                              traceback=[f"CheckFailure: {message}"]))
            cell.outputs = outs
            cell.execution_count = None
        return nb, resources


REDACTED = "[text from the grader's hidden tests removed]"


def _secrets(bundle: dict) -> list[str]:
    """What no message may carry: the hidden tests' lines (those long enough not to be
    ordinary words) and the grader's seed."""
    from grader.notebook import hidden_lines

    rebuilt = bundle.get("rebuilt") if isinstance(bundle.get("rebuilt"), dict) else {}
    found = {line for line in hidden_lines(rebuilt) if len(line) >= 12
             and not line.startswith("### ")}
    seed = bundle.get("seed")
    if isinstance(seed, int) and abs(seed) >= 1000:
        found.add(str(seed))
    return sorted(found, key=len, reverse=True)


def redact(message: str, secrets: list[str]) -> str:
    """``message`` with every occurrence of a secret (whitespace runs matched loosely)
    replaced by :data:`REDACTED`: the last net under a hidden check's message, whose
    values and text the student's code produced.

    >>> redact("got x = check(f, 3)", ["check(f,  3)"])
    "got x = [text from the grader's hidden tests removed]"
    """
    import re

    for secret in secrets:
        pattern = r"\s+".join(re.escape(part) for part in secret.split())
        message = re.sub(pattern, REDACTED, message)
    return message


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
