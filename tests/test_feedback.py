"""The message template, value descriptions, stderr hygiene and nbgrader's IgnorePattern."""
import re
import sys
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from autograder import format_failure, quiet
from autograder.core.feedback import call_signature, describe_value
from tests.conftest import REPO


def test_template_order():
    msg = format_failure("f(x) is wrong", expected=1, got=2, cause="c", fix="x", section="1.2")
    assert msg.splitlines() == ["f(x) is wrong", "  expected: 1", "  got:      2",
                                "  likely cause: c", "  fix: x", "  reread: section 1.2"]


def test_describe_and_signature():
    assert describe_value(np.zeros((2, 3), np.int32)) == "i32[2,3]"
    assert describe_value({"w": jnp.ones(2)}) == "{'w': f32[2]}"

    def loss(w, x):
        return w

    assert call_signature(loss, (jnp.ones(3), jnp.ones((8, 3)))) == "loss(w=f32[3], x=f32[8,3])"


def test_quiet_captures_python_warnings_sys_stderr_and_fd2(capfd):
    import os

    with quiet() as captured:
        warnings.warn("careful")
        print("python stderr", file=sys.stderr)
        os.write(2, b"C++ log line\n")
    out, err = capfd.readouterr()
    assert err == "" and out == ""
    assert captured.summary() == ["UserWarning: careful", "python stderr", "C++ log line"]


def _ignore_pattern() -> str:
    ns = {"get_config": lambda: _Cfg()}
    exec((REPO / "nbgrader_config.py").read_text(), {**ns, "__file__": str(REPO / "nbgrader_config.py")})
    return _Cfg.last.IgnorePattern.pattern


class _Node(dict):
    def __getattr__(self, name):
        return self.setdefault(name, _Node())

    def __setattr__(self, name, value):
        self[name] = value


class _Cfg(_Node):
    last = None

    def __init__(self):
        super().__init__()
        _Cfg.last = self


def test_ignore_pattern_drops_warnings_and_absl_logs_only():
    pattern = _ignore_pattern()
    assert _Cfg.last.IgnorePattern.enabled is True
    drops = [
        "/x/jax/_src/numpy/array.py:12: UserWarning: Explicitly requested dtype float64\n",
        "<ipython-input-3>:2: DeprecationWarning: jax.tree_map is deprecated\n",
        "W0000 00:00:1733150000.123456   12345 cpu_client.cc:123] something\n",
    ]
    keeps = ["Traceback (most recent call last):\n", "my debug print to stderr\n",
             "AssertionError: Warning: not a real warning line\n"]
    for text in drops:
        assert re.search(pattern, text), text
    for text in keeps:
        assert not re.search(pattern, text), text


def test_ipython_traceback_hides_library_frames():
    from IPython.core.interactiveshell import InteractiveShell

    from autograder import assert_tree_matches
    from autograder.core.feedback import CheckFailure

    shell = InteractiveShell.instance()
    try:
        assert_tree_matches(jnp.ones(2), jnp.zeros(2), name="f(x)")
    except CheckFailure as err:
        text = "\n".join(err._render_traceback_())
    assert "f(x) has wrong values" in text
    assert "autograder/core/numeric.py" not in text and "autograder/core/feedback.py" not in text
    assert "test_feedback.py" in text  # the caller's own frame stays
    del shell


def test_a_students_error_keeps_their_frames_and_none_of_the_library():
    """A check that fails on the student's exception chains it, its traceback cut to the
    student's frames: no frame from any file of the autograder package, whichever
    subpackage the check lives in."""
    import os

    import jax.numpy as jnp

    import autograder
    from autograder import CheckFailure, assert_compiles_at_most

    def student(x):
        return x.reshape(7)  # raises inside JAX, called from the library

    with pytest.raises(CheckFailure) as info:  # a check of the jit/ subpackage
        assert_compiles_at_most(student, [(jnp.ones(2),)], 1)
    cause = info.value.__cause__
    assert isinstance(cause, Exception)
    files, tb = [], cause.__traceback__
    while tb is not None:
        files.append(os.path.abspath(tb.tb_frame.f_code.co_filename))
        tb = tb.tb_next
    library = os.path.dirname(os.path.abspath(autograder.__file__)) + os.sep
    assert any(f == os.path.abspath(__file__) for f in files)  # the student's line stays
    assert not [f for f in files if f.startswith(library)]
