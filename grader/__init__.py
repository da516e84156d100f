"""The host-side grader: pipeline, sandbox launcher, judge, nbgrader plugins, CLI.

Never mounted into a grading sandbox and never imported by a notebook: what runs next
to student code is the ``autograder`` check library; what judges it lives here.
"""
