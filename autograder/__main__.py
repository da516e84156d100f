"""``python -m autograder COMMAND``: the instructor's command line (see grader.cli).

The command line belongs to the host-side ``grader`` package; this entry point keeps
the name the course documents. Inside a grading sandbox ``grader`` is not mounted, so
this fails there, as it should.
"""
import sys

from grader.cli import main

if __name__ == "__main__":
    sys.exit(main())
