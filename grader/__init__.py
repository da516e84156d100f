"""The host-side grader: pipeline, sandbox launcher, judge, nbgrader plugins, CLI.

Never mounted into a grading sandbox and never imported by a notebook: what runs next
to student code is the ``autograder`` check library; what judges it lives here.
"""

import warnings as _warnings

# The grader imports JAX (the judgement is the check library's) and then starts
# sandboxes with subprocess, whose fork is followed at once by exec: none of JAX's
# threads run in the child, so Python 3.12's warning that a fork of a multithreaded
# process may deadlock does not apply, and it printed once per sandbox started.
_warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called",
                         category=RuntimeWarning, module="subprocess")
