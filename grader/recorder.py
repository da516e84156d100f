"""Recording verdicts in the gradebook through nbgrader's Python API.

One long-lived process per batch (``python -m grader.recorder``, started in the course
folder with ``JAXCOURSE_BUNDLES`` set, so nbgrader_config.py puts the ``TrustedReplay``
preprocessor in place of execution). It imports nbgrader once, then takes requests, one
JSON line each on stdin::

    {"assignment": "01_grad", "submitted": "autograded/.grading/.../submitted",
     "students": ["ada", "ben"]}

and for each student calls ``NbGraderAPI.autograde`` (nbgrader keeps the gradebook,
locked cells, late penalties, feedback and export), answering one JSON line per
student: ``{"student": "ada", "success": true}`` or with ``"error"``. One process is
one SQLite writer; one student's failure costs only that student.
"""
from __future__ import annotations

import json
import os
import sys


def _api():
    sys.modules.setdefault("rfc3987_syntax", None)  # see grader.course: a lean start
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.apps.nbgraderapp import NbGraderApp
    from nbgrader.coursedir import CourseDirectory

    app = NbGraderApp()
    app.initialize([])  # reads nbgrader_config.py of this folder and the Jupyter paths
    # Recording uses no exchange, but NbGraderAPI lists it when it starts, through the
    # configured authenticator: on a JupyterHub (JupyterHubAuthPlugin server-wide) that
    # needs the hub's API and token, which an instructor grading over ssh, or from any
    # shell the hub did not start, lacks. The gradebook needs no course membership.
    app.config.Authenticator.plugin_class = "nbgrader.auth.NoAuthPlugin"
    coursedir = CourseDirectory(config=app.config)
    return NbGraderAPI(coursedir=coursedir, config=app.config), coursedir


def serve(stdin=sys.stdin, stdout=None) -> int:
    if stdout is None:
        # Answers go to the real stdout; anything printed or logged goes to stderr.
        stdout = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    api, coursedir = _api()
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            assignment = str(request["assignment"])
            folder = str(request["submitted"])
            students = [str(s) for s in request["students"]]
        except (ValueError, KeyError, TypeError) as err:
            stdout.write(json.dumps({"error": f"bad request: {err}"}) + "\n")
            stdout.flush()
            continue
        default = coursedir.submitted_directory
        coursedir.submitted_directory = folder
        try:
            for student in students:
                try:
                    result = api.autograde(assignment, student, force=True, create=True)
                except Exception as err:  # noqa: BLE001 - reported, the batch goes on
                    result = {"success": False, "error": repr(err)}
                stdout.write(json.dumps({"student": student,
                                         "success": bool(result.get("success")),
                                         "error": str(result.get("error") or "")[-3000:]})
                             + "\n")
                stdout.flush()
        finally:
            coursedir.submitted_directory = default
        stdout.write(json.dumps({"done": True}) + "\n")
        stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve())
