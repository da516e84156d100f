"""``python -m grader.nbgrader_main ARGS``: ``nbgrader ARGS`` with a leaner start.

jsonschema (imported through nbformat) loads its optional IRI format checker,
rfc3987_syntax (a dependency of jupyter_events), which compiles a grammar at import
time: about 1 s of every nbgrader process on a 2-core machine. jsonschema skips the
checker when the import fails, and nbgrader never validates IRI formats. The grading
sandbox's notebook driver (grader/sandbox/child.py) does the same.
"""
import sys

sys.modules.setdefault("rfc3987_syntax", None)

from nbgrader.apps.nbgraderapp import main  # noqa: E402 - after the lean-start switch

if __name__ == "__main__":
    main()
