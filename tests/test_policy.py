"""The tampering policy: what is held for review, read from the syntax tree."""
from __future__ import annotations

import nbformat
import pytest

from grader.policy import held_exercises, held_tests


def _nb():
    nb = nbformat.v4.new_notebook()
    setup = nbformat.v4.new_code_cell("import jax\nimport jax.numpy as jnp\nimport numpy as np\n"
                                      "x_data = jnp.ones(3)\n")
    sol = nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    return x\n"
                                    "    ### END SOLUTION\n")
    sol.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "m_f"}
    test = nbformat.v4.new_code_cell("from autograder import assert_matches_reference\n"
                                     "def _ref(x):\n    return x\n_secret = 3\n"
                                     "assert_matches_reference(f, _ref, (x_data,))\n")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_m_f",
                                 "points": 1}
    nb.cells = [setup, sol, test]
    return nb


HONEST = {
    # Making the guard stricter is a student's own test, not tampering.
    "transfer_guard_disallow": "def f(x):\n    with jax.transfer_guard('disallow'):\n"
                               "        return x + 1\n",
    "plain": "def f(x):\n    return jnp.sum(x ** 2) + x_data[0]\n",
    "partial_jit": "from functools import partial\n@partial(jax.jit, static_argnums=1)\n"
                   "def f(x, n):\n    return jax.lax.fori_loop(0, n, lambda i, v: v / 2, x)\n",
    "frozen_dataclass": "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass P:\n"
                        "    w: int\n    def __post_init__(self):\n"
                        "        object.__setattr__(self, 'w', 1)\n",
    "pallas_refs": "def kernel(x_ref, o_ref):\n    o_ref[...] = x_ref[...] * 2\n",
    "stderr_print": "import sys\ndef f(x):\n    print('debug', file=sys.stderr)\n    return x\n",
    "public_helper": "from autograder import count_primitives\n"
                     "c = count_primitives(jax.make_jaxpr(jnp.sin)(1.0))\n",
    "own_attribute": "class Model:\n    def __init__(self):\n        self.w = 1\n"
                     "m = Model()\nm.w = 2\n",
    "constant_getattr": "def f(x):\n    return getattr(jnp, 'sin')(x)\n",
    "local_shadows_test_name": "def f(x):\n    _secret = 1\n    return x * _secret\n",
    # What exercises need of the standard library (issue 29: these were held).
    "pytree_fields_by_name": "import dataclasses\n"
                             "def flatten(obj):\n"
                             "    names = [f.name for f in dataclasses.fields(obj)]\n"
                             "    return tuple(getattr(obj, n) for n in names), names\n",
    "find_a_trace": "import os, pathlib\n"
                    "def latest(folder):\n"
                    "    found = [os.path.join(r, f) for r, _, fs in os.walk(folder) for f in fs]\n"
                    "    found += [str(p) for p in pathlib.Path(folder).rglob('*.pb')]\n"
                    "    return sorted(found, key=os.path.getmtime)[-1]\n",
    "read_a_trace": "import io, gzip, json\n"
                    "def load(path):\n"
                    "    with gzip.open(path, 'rt') as f:\n"
                    "        return json.load(io.StringIO(f.read()))\n",
    "listdir": "import os\nnames = sorted(os.listdir('.'))\n",
    "path_read": "from pathlib import Path\ntext = Path('x.txt').open('r').read()\n",
    "str_replace": "def f(x):\n    return 'a-b'.replace('-', '_')\n",
}

TAMPERING = {
    "exec": ("exec('import os')\n", "calls exec()"),
    "computed_getattr": ("def f(x):\n    return getattr(jnp, 's' + 'in')(x)\n",
                         "computed attribute name"),
    "module_write": ("jnp.sum = lambda x: 0\n", "rebinds the library attribute jnp.sum"),
    "setattr_module": ("setattr(jax, 'jit', lambda f: f)\n", "on a module"),
    "frames": ("import sys\ndef f(x):\n    return sys._getframe(1).f_globals['_ref'](x)\n",
               "sys._getframe"),
    "test_name": ("def f(x):\n    return _ref(x)\n", "only the grader's tests define"),
    "ipython": ("get_ipython().events.register('pre_run_cell', print)\n", "get_ipython"),
    "file_write": ("open('probe/x.json', 'w').write('{}')\n", "opens a file for writing"),
    "rebind_alias": ("jnp = None\n", "rebinds jnp"),
    "private_module": ("import autograder.core.check\n", "private module autograder.core.check"),
    # The check library's subpackages are the grader's own modules, under any spelling.
    "grader_subpackage": ("from autograder import programs\n", "private autograder.programs"),
    "grader_submodule": ("from autograder.core import check\n",
                         "private module autograder.core"),
    "grader_attribute": ("import autograder\nautograder.jit.compile.is_jit_function = id\n",
                         "private autograder.jit"),
    # A guard a check set, loosened from inside (09_debugging's quiet_train).
    "transfer_guard_allow": ("def f(x):\n    with jax.transfer_guard('allow'):\n"
                             "        return x\n", "transfer guard to 'allow'"),
    "transfer_guard_h2d_log": ("jax.transfer_guard_host_to_device('log')\n",
                               "transfer guard to 'log'"),
    "transfer_guard_flag": ("jax.config.update('jax_transfer_guard', 'allow')\n",
                            "transfer guard to 'allow'"),
    "globals_write": ("globals()['f'] = print\n", "globals()"),
    "jax_internals": ("from jax._src import core\n", "jax._src"),
    "threads": ("import threading\n", "imports threading"),
    "dunder": ("def f(x):\n    return f.__globals__\n", "__globals__"),
    "monitoring": ("jax.monitoring.clear_event_listeners()\n", "jax.monitoring"),
    # Through an alias, or getattr with a constant name (issue 36's policy gaps).
    "alias_store": ("m = jnp\nm.sum = lambda x: 0\n", "rebinds the library attribute"),
    "alias_private": ("j = jax\nj._src.config\n", "jax._src"),
    "constant_getattr_private": ("getattr(jax, '_src')\n", "jax._src"),
    "constant_getattr_monitoring": ("getattr(jax, 'monitoring').clear_event_listeners()\n",
                                    "jax.monitoring"),
    "constant_setattr": ("setattr(jnp, 'sum', print)\n", "rebinds the library attribute"),
    "computed_setattr_object": ("def f(x):\n    setattr(f, 'lo' + 'wer', None)\n",
                                "computed attribute name"),
    "path_write": ("from pathlib import Path\nPath('probe/x.json').open('w').write('{}')\n",
                   "to write a file"),
    "io_write": ("import io\nio.open('probe/x.json', 'w').write('{}')\n", "to write a file"),
    "path_write_text": ("import pathlib\npathlib.Path('probe/x.json').write_text('{}')\n",
                        "writes files"),
}


@pytest.mark.parametrize("name", HONEST)
def test_honest_code_is_not_held(name):
    assert held_exercises(_nb(), {"m_f": HONEST[name]}) == {}


@pytest.mark.parametrize("name", TAMPERING)
def test_reaching_around_the_language_is_held(name):
    code, reason = TAMPERING[name]
    held = held_exercises(_nb(), {"m_f": code})
    assert "m_f" in held and any(reason in r for r in held["m_f"]), held


def test_held_exercises_hold_their_test_cells_with_the_reason():
    held = held_tests(_nb(), {"m_f": TAMPERING["exec"][0]})
    assert list(held) == ["test_m_f"]
    assert held["test_m_f"].startswith("Held for review: the solution of m_f")
    assert "calls exec()" in held["test_m_f"]


def test_a_syntax_error_is_the_students_own_failure_not_tampering():
    assert held_exercises(_nb(), {"m_f": "def f(x)\n    return x\n"}) == {}


def _modules() -> list[str]:
    from tests.conftest import REPO

    return sorted(p.name for p in (REPO / "source").iterdir() if p.is_dir()
                  and (REPO / "tests" / "variants" / f"{p.name}.py").exists())


@pytest.mark.parametrize("module", _modules())
def test_no_correct_variant_is_held(module):
    """A correct answer is never held for review: every correct variant of the course's
    exercises (tests/variants/) passes the policy, alone in its solution cell."""
    import importlib
    import json

    from tests.conftest import REPO

    source = json.loads((REPO / "source" / module / f"{module}.ipynb").read_text())
    variants = importlib.import_module(f"tests.variants.{module}").VARIANTS
    held = {}
    for gid, v in variants.items():
        for k, code in enumerate(v["correct"]):
            found = held_exercises(source, {gid: code})
            if found:
                held[f"{gid} correct #{k}"] = found
    assert held == {}
