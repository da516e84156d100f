"""Keeps graded cells free of stderr output.

nbgrader scores any stderr output in a test cell as a failure, so a correct answer
that makes JAX print a warning would score 0. Checks run the student's code inside
:func:`quiet`: Python warnings are recorded instead of printed, ``sys.stderr`` is
captured, and the process's file descriptor 2 (where XLA's C++ logging writes) is
redirected to a temporary file. What was captured is reported on stdout, which
costs nothing.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import sys
import tempfile
import warnings


@dataclasses.dataclass
class Captured:
    """What a block wrote: recorded warnings and stderr text."""

    warnings: list = dataclasses.field(default_factory=list)
    stderr: str = ""

    def summary(self, limit: int = 3) -> list[str]:
        seen = []
        for w in self.warnings:
            text = f"{w.category.__name__}: {w.message}"
            if text not in seen:
                seen.append(text)
        for line in self.stderr.splitlines():
            if line.strip() and line not in seen:
                seen.append(line.strip())
        return seen[:limit]


@contextlib.contextmanager
def _fd2_to_tempfile():
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 (rare embedded interpreters): nothing to redirect
        yield lambda: ""
        return
    tmp = tempfile.TemporaryFile(mode="w+b")
    try:
        sys.stderr.flush()
        os.dup2(tmp.fileno(), 2)
        def read():
            tmp.seek(0)
            return tmp.read().decode("utf-8", "replace")
        yield read
    finally:
        try:
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - a broken stderr must not hide the result
            pass
        os.dup2(saved, 2)
        os.close(saved)
        tmp.close()


@contextlib.contextmanager
def quiet():
    """Runs a block with warnings recorded and stderr captured.

    >>> import sys, warnings
    >>> with quiet() as captured:
    ...     warnings.warn("float64 is not available")
    ...     print("to stderr", file=sys.stderr)
    >>> captured.summary()
    ['UserWarning: float64 is not available', 'to stderr']
    """
    captured = Captured()
    buffer = io.StringIO()
    with warnings.catch_warnings(record=True) as records, _fd2_to_tempfile() as read_fd2:
        warnings.simplefilter("always")
        old_stderr = sys.stderr
        sys.stderr = buffer
        try:
            yield captured
        finally:
            sys.stderr = old_stderr
            captured.warnings = list(records)
            captured.stderr = buffer.getvalue() + read_fd2()


def report_captured(captured: Captured, who: str) -> None:
    """Prints (to stdout) a note about warnings a passing call emitted."""
    notes = captured.summary()
    if notes:
        print(f"note: {who} emitted a warning (it costs no points):")
        for n in notes:
            print(f"  {n}")
