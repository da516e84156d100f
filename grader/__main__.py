"""``python -m grader COMMAND``: the same command line as ``python -m autograder`` (grader.cli)."""
import sys

from grader.cli import main

sys.exit(main())
