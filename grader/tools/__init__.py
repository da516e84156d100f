"""Instructor and developer tools run as ``python -m grader.tools.NAME`` or through
``python -m autograder``: benchmarks, the demo, mutants, notebook runs on any backend,
submissions for tests, the test suite's time report."""
