"""The adversarial corpus: submissions of ``00_corpus`` and what must become of each.

Each case replaces the solution cells (``add``/``norm2``/``halve``; None keeps a
correct answer) and may rewrite the notebook or the submission folder. ``expect`` is
the outcome: status, the reason codes allowed, and the score out of 3 (None: no
score, the submission could not be graded). A case that leaves ``halve`` alone gets
its point on top of the score written for ``add`` and ``norm2`` (``graded`` adds it).
Placeholders in code: ``{course}`` (the course folder on the host), ``{grader}`` (the
host-side grader package), ``{port}`` (a TCP server the test runs on the host's
127.0.0.1), ``{marker}`` (a unique string the test looks for afterwards), ``{seed}`` (the grader's
seed, ``c.Grading.seed``).

Solutions that reach around the language (processes, sockets, file writes, private
modules, dynamic code, frames, IPython hooks) have their exercise held for review
(``held_for_review``): 0 points until a person grades it in the Formgrader.
"""
from __future__ import annotations

import json

ADD = "def add(x, y):\n    return x + y\n"
HALVE = ("from functools import partial\n@partial(jax.jit, static_argnums=1)\n"
         "def halve(x, n):\n    return jax.lax.fori_loop(0, n, lambda i, v: v / 2, x)\n")
# Right values, wrong structure: a Python loop unrolls into one divide per step.
UNROLLED_HALVE = ("from functools import partial\n@partial(jax.jit, static_argnums=1)\n"
                  "def halve(x, n):\n    for _ in range(n):\n        x = x / 2\n    return x\n")
# Right values, never jitted.
PLAIN_HALVE = "def halve(x, n):\n    return x / 2.0 ** n\n"
NORM2 = "def norm2(x):\n    return jnp.sqrt(jnp.sum(x ** 2))\n"
WRONG_ADD = "def add(x, y):\n    return x - y\n"
WRONG_NORM2 = "def norm2(x):\n    return jnp.sum(jnp.abs(x))\n"
BLANK = "BLANK"

# What the frames of a running test cell hold: its hidden code and the grader's seed.
_FRAMES = ("import sys\n"
           "def _grab():\n"
           "    f, out = sys._getframe(), []\n"
           "    while f is not None:\n"
           "        out.append(repr(f.f_locals.get('hidden', '')) + repr(f.f_locals.get('seed', '')))\n"
           "        f = f.f_back\n"
           "    return ' | '.join(out)\n")
# A wrong add that would turn right only if the sandbox let it read a file.
_READ_THEN_CHEAT = ("def add(x, y):\n"
                    "    try:\n"
                    "        open({path!r}, 'rb').read(10)\n"
                    "        return x + y\n"
                    "    except Exception:\n"
                    "        return x - y\n")


def _case(name, what, *, add=None, norm2=None, halve=None, mutate=None, expect):
    if halve is None and expect["score"] is not None:
        # halve is left correct: it earns its point (blank submissions leave it blank).
        bonus = 0 if add == BLANK and norm2 == BLANK else 1
        scores = expect["score"] if isinstance(expect["score"], set) else {expect["score"]}
        expect = dict(expect, score={s + bonus for s in scores})
    return {"name": name, "what": what, "add": add, "norm2": norm2, "halve": halve,
            "mutate": mutate, "expect": expect}


def graded(score, *reasons):
    """Graded with this score (or one of a set); with reasons, also needing attention."""
    if reasons:
        return {"status": "attention", "reasons": set(reasons), "score": score}
    return {"status": "graded", "reasons": {""}, "score": score}


HELD = "held_for_review"


def attention(*reasons):
    return {"status": "attention", "reasons": set(reasons), "score": None}


CASES = [
    # Honest submissions: scores as plain nbgrader gives them.
    _case("honest_full", "correct answers", expect=graded(2)),
    _case("honest_blank", "the release notebook, untouched", add=BLANK, norm2=BLANK,
          halve=BLANK, expect=graded(0)),
    _case("honest_helper", "correct, and calls the course's public autograder helper",
          norm2="import jax\nfrom autograder import count_primitives\n"
                "_counts = count_primitives(jax.make_jaxpr(jnp.sin)(1.0))\n"
                "def norm2(x):\n    return jnp.sqrt(jnp.sum(x ** 2))\n",
          expect=graded(2)),
    _case("honest_partial", "one right, one wrong", norm2=WRONG_NORM2, expect=graded(1)),
    _case("honest_warning", "correct, but warns and writes to stderr",
          add="import warnings, sys\n"
              "def add(x, y):\n"
              "    warnings.warn('this is fine', UserWarning)\n"
              "    print('debug output', file=sys.stderr)\n"
              "    return x + y\n",
          expect=graded(2)),
    _case("honest_stdlib", "correct, and uses what exercises need of the standard library: "
          "folders walked and files read (pathlib, os.walk, io), fields read by name",
          add="import dataclasses, io, os, pathlib\n"
              "@dataclasses.dataclass\nclass _Pair:\n    x: object\n    y: object\n"
              "_seen = sorted(str(p) for p in pathlib.Path('.').glob('*'))\n"
              "_walked = [f for _, _, fs in os.walk('.') for f in fs]\n"
              "_text = io.StringIO('a,b').read()\n"
              "def add(x, y):\n    pair = _Pair(x, y)\n"
              "    a, b = (getattr(pair, f.name) for f in dataclasses.fields(pair))\n"
              "    return a + b\n",
          expect=graded(2)),
    _case("honest_float64", "correct, asks for float64 (JAX warns and truncates)",
          add="def add(x, y):\n    return jnp.asarray(x, jnp.float64) + y\n", expect=graded(2)),
    _case("added_cell_helper", "add calls a helper defined only in a cell the student "
          "added: grading runs the solution cells, so add fails (its feedback says why)",
          add="def add(x, y):\n    return _plus(x, y)\n", mutate="added_cell", expect=graded(1)),
    _case("honest_syntax_error", "a syntax error in one solution", add="def add(x, y)\n    return x\n",
          expect=graded(1)),
    _case("honest_big_output", "prints 3 MB once, then answers correctly",
          add="print('x' * 3_000_000)\n" + ADD, expect=graded(2)),
    _case("honest_slow", "correct but takes a few seconds", add="import time\ntime.sleep(3)\n" + ADD,
          expect=graded(2)),
    # Crashes.
    _case("crash_os_exit", "os._exit while the cell runs", add="import os\nos._exit(3)\n",
          expect=graded(1, "kernel_died")),
    _case("crash_os_exit_in_call", "os._exit when the grader calls add",
          add="import os\ndef add(x, y):\n    os._exit(1)\n", expect=graded(1, "kernel_died")),
    _case("crash_segfault", "a segfault through ctypes",
          add="import ctypes\nctypes.string_at(0)\n", expect=graded(1, "kernel_died", HELD)),
    _case("crash_kill_kernel", "the kernel kills itself with SIGKILL",
          add="import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
          expect=graded(1, "kernel_died")),
    _case("crash_kill_runner", "kills the process that drives the kernel",
          add="import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + ADD,
          expect=graded(1, "kernel_died")),
    # Hangs.
    _case("hang_loop", "an endless loop", add="while True:\n    pass\n", expect=graded(1, "timeout")),
    _case("hang_ignores_interrupt", "an endless loop that ignores SIGINT",
          add="import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n",
          expect=graded(1, "timeout")),
    _case("hang_in_call", "add sleeps forever when the grader calls it",
          add="import time\ndef add(x, y):\n    time.sleep(10_000)\n",
          expect=graded(1, "timeout")),
    # Resource bombs.
    _case("bomb_memory", "allocates far more memory than allowed",
          add="import numpy as _np\n_blocks = [_np.ones(2**27) for _ in range(100)]\n",
          expect=graded(1, "out_of_memory", "kernel_died")),
    _case("bomb_fork", "a fork bomb",
          add="import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
          # Stopped at the task limit, not left to spin on failed forks until its
          # cell's time runs out (which starved the runs beside it).
          expect=graded(1, "kernel_died", "out_of_memory")),
    _case("bomb_output", "prints without end", add="while True:\n    print('spam ' * 1000)\n",
          expect=graded(1, "output_flood", "timeout")),
    _case("bomb_disk", "writes files until the disk is full",
          add="_i = 0\nwhile True:\n    open(f'fill{_i}', 'wb').write(b'0' * 2**24)\n    _i += 1\n",
          expect=graded(1, "out_of_memory", "kernel_died")),
    _case("bomb_threads", "starts threads without end",
          add="import threading, time\nwhile True:\n"
              "    threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()\n",
          # Thousands of sleeping threads stay in the kernel and can starve the
          # cells after the bomb too (XLA cannot start its threads): norm2 and halve
          # may lose their points.
          halve=HALVE, expect=graded({0, 1, 2}, "kernel_died", "timeout", "out_of_memory",
                                     HELD)),
    # Escapes: processes, network, files.
    _case("escape_background", "starts processes meant to outlive the kernel",
          add="import os, subprocess\n"
              "subprocess.Popen(['sleep', '{marker}'])\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    if os.fork() == 0:\n"
              "        os.execvp('sleep', ['sleep', '{marker}'])\n"
              "    os._exit(0)\n" + ADD,
          expect=graded(1, HELD)),
    _case("escape_network", "connects to the grader's loopback and the internet",
          add="import socket\n"
              "for _host in [('127.0.0.1', {port}), ('1.1.1.1', 80)]:\n"
              "    try:\n"
              "        socket.create_connection(_host, timeout=2).sendall(b'{marker}')\n"
              "    except OSError:\n"
              "        pass\n" + ADD,
          expect=graded(1, HELD)),
    _case("escape_read_source", "reads the instructor's source notebook",
          add=_READ_THEN_CHEAT.format(path="{course}/source/00_corpus/00_corpus.ipynb"),
          expect=graded(1)),
    _case("escape_read_gradebook", "reads the gradebook",
          add=_READ_THEN_CHEAT.format(path="{course}/gradebook.db"), expect=graded(1)),
    _case("escape_read_other", "reads another student's submission",
          add=_READ_THEN_CHEAT.format(path="{course}/submitted/honest_full/00_corpus/00_corpus.ipynb"),
          expect=graded(1)),
    _case("escape_read_grader", "reads the host-side grader's code",
          add=_READ_THEN_CHEAT.format(path="{grader}/policy.py"), expect=graded(1)),
    _case("escape_write", "writes into the course, its home and /tmp of the host",
          add="for _p in ['{course}/{marker}', '{course}/autograded/{marker}', '/tmp/{marker}',\n"
              "           '/root/{marker}']:\n"
              "    try:\n"
              "        open(_p, 'w').write('pwned')\n"
              "    except OSError:\n"
              "        pass\n" + ADD,
          expect=graded(1, HELD)),
    # Tampering with the checks, the libraries, the test cells, the outputs.
    _case("tamper_checks", "disables the autograder's checks, answers wrong",
          add="import autograder\n"
              "autograder.assert_matches_reference = lambda *a, **k: None\n" + WRONG_ADD,
          norm2="import autograder.core.numeric\n"
                "autograder.core.numeric.assert_matches_reference = lambda *a, **k: None\n"
                "assert_matches_reference = lambda *a, **k: None\n" + WRONG_NORM2,
          # The no-op check also silences halve's test: its records go missing, 0.
          halve=HALVE, expect=graded(0, HELD)),
    _case("tamper_numpy", "makes numpy and jnp comparisons always succeed, answers wrong",
          add="import numpy\nnumpy.allclose = lambda *a, **k: True\nnumpy.isclose = lambda *a, **k: True\n"
              "jnp.allclose = lambda *a, **k: True\n" + WRONG_ADD,
          expect=graded(1, HELD)),
    _case("tamper_equal_anything", "returns an object equal to anything",
          add="class _Any:\n    __eq__ = lambda s, o: True\n    __array__ = None\n"
              "def add(x, y):\n    return _Any()\n", expect=graded(1)),
    _case("tamper_records", "replaces the recorder of the test cells with one that fakes results",
          add="import autograder.core.check as _c, json, os\n"
              "def _fake(test_id, source, ns):\n"
              "    os.makedirs('probe', exist_ok=True)\n"
              "    json.dump({'test_id': test_id, 'records': []}, open(f'probe/{test_id}.json', 'w'))\n"
              "    open(f'probe/{test_id}.npz', 'wb').write(b'')\n"
              "_c.run_test_cell = _fake\n" + WRONG_ADD,
          halve=HALVE, expect=graded(0, HELD)),
    _case("tamper_ipython", "rewrites every later cell through IPython's input transformers",
          add="get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])\n" + WRONG_ADD,
          halve=HALVE, expect=graded(0, HELD)),
    _case("tamper_test_cells", "edits the locked test cells to pass, answers wrong",
          add=WRONG_ADD, norm2=WRONG_NORM2, mutate="edit_tests", expect=graded(0)),
    _case("tamper_outputs_and_metadata", "fakes passing outputs, points and cell types",
          add=WRONG_ADD, mutate="fake_outputs", expect=graded(1)),
    _case("tamper_kernel", "asks for another kernel in its metadata", mutate="kernelspec",
          expect=graded(2)),
    _case("tamper_extra_files", "ships autograder.py and jax.py beside the notebook",
          add=WRONG_ADD, mutate="shadow_files", expect=graded(1)),
    # Forged facts about compiled code: wrong structure, facts rewritten by dynamic code.
    _case("forge_op_counter", "unrolled loop; rewrites the op counter via exec of built strings",
          halve="_m = 'autograder.' + 'programs.artifacts'\n"
                "exec('import ' + _m + ' as _a\\n_a.static_facts = lambda t: "
                "{\\'ops\\': {}, \\'refused\\': []}')\n" + UNROLLED_HALVE,
          expect=graded(2, HELD)),
    _case("forge_jit", "never jitted; fakes .lower/.trace and the compile counter by name",
          halve=PLAIN_HALVE + "setattr(halve, 'lo' + 'wer', lambda *a: None)\n"
                "setattr(halve, 'tr' + 'ace', lambda *a: None)\n"
                "import importlib\n"
                "_c = importlib.import_module('autograder.' + 'jit.compile')\n"
                "setattr(_c, 'is_jit_' + 'function', lambda f: True)\n",
          expect=graded(2, HELD)),
    _case("forge_records", "unrolled loop; a thread rewrites the result files afterwards",
          halve=UNROLLED_HALVE + "import threading, time\n"
                "def _rewrite():\n"
                "    while True:\n"
                "        open('probe/test_corpus_halve.json', 'w').write('{}')\n"
                "        time.sleep(0.01)\n"
                "threading.Thread(target=_rewrite, daemon=True).start()\n",
          expect=graded(2, HELD)),
    _case("forge_artifact", "unrolled loop; exports a rolled loop in its place, by getattr",
          halve=UNROLLED_HALVE + "import jax as _j\n"
                "_mod = getattr(__import__('autograder'), '_arti' + 'facts')\n"
                "_real = _mod.export_program\n"
                "def _rolled(x, n):\n    return _j.lax.fori_loop(0, n, lambda i, v: v / 2, x)\n"
                "_mod.export_program = lambda fn, a=(), k=None: _real(_j.jit(_rolled, static_argnums=1), a, k)\n",
          expect=graded(2, HELD)),
    _case("wrong_unrolled", "right values, unrolled loop, nothing forged", halve=UNROLLED_HALVE,
          expect=graded(2)),
    _case("wrong_not_jitted", "right values, never jitted, nothing forged", halve=PLAIN_HALVE,
          expect=graded(2)),
    # Reading the hidden tests or the seed from inside the kernel, and trying to get
    # them back out (test_corpus.py): no feedback may carry them. Frames reach them
    # while the test runs (held for review, and still nothing comes back); the plain
    # places a cell's text is kept find nothing.
    _case("leak_stash_print", "stashes the running test's hidden code and seed from its "
          "frames, prints them later",
          add=_FRAMES + "_stash = []\ndef add(x, y):\n    _stash.append(_grab())\n"
              "    return x + y\n",
          norm2="print(_stash)\n" + NORM2, expect=graded(1, HELD)),
    _case("leak_raise", "raises with the running test's hidden code as its message",
          add=_FRAMES + "def add(x, y):\n    raise ValueError(_grab())\n",
          expect=graded(1, HELD)),
    _case("leak_own_class", "raises an exception class named after the seed",
          norm2="def norm2(x):\n"
                "    raise type('Seed{seed}Error', (Exception,), {})('{seed}')\n",
          expect=graded(1)),
    _case("leak_plain_places", "looks for the test cell's text where a kernel keeps a cell's",
          add="import linecache\n_found = []\ndef add(x, y):\n"
              "    _found.append(repr([v[2] for v in list(linecache.cache.values())\n"
              "                        if isinstance(v, tuple) and len(v) > 2]))\n"
              "    _found.append(quit._ip.displayhook.exec_result.info.raw_cell)\n"
              "    _found.append(quit._ip.kernel.get_parent('shell')['content']['code'])\n"
              "    _found.append(str(In) + str(_ih))\n"
              "    return x + y\n",
          norm2="print('found:', _found)\nprint('last:', quit._ip.last_execution_result.info.raw_cell)\n"
                + NORM2, expect=graded(2)),
    _case("leak_notebook_file", "reads the notebook the sandbox runs from its folder",
          add="import glob\nfor _p in glob.glob('*.ipynb'):\n    print(open(_p).read())\n"
              "print('notebooks here:', glob.glob('*.ipynb'))\n" + ADD,
          expect=graded(2)),
    _case("leak_marker_text", "has nbgrader's hidden-test markers as text in its own cell",
          add='# ### BEGIN HIDDEN TESTS\n_note = """\n### BEGIN HIDDEN TESTS\n'
              '### END HIDDEN TESTS\n"""\n' + ADD,
          expect=graded(2)),
    # Malformed submissions.
    _case("malformed_duplicate_cells", "a graded cell twice (first copy wrong)",
          mutate="duplicate_solution", expect=graded(1)),
    _case("malformed_deleted_cells", "the norm2 cells deleted", mutate="delete_norm2",
          expect=graded(1)),
    _case("malformed_truncated", "a truncated upload", mutate="truncate", expect=attention("malformed")),
    _case("malformed_not_a_notebook", "valid JSON, not a notebook", mutate="not_notebook",
          expect=attention("malformed")),
    _case("malformed_oversized", "a 21 MB notebook", mutate="oversize", expect=attention("malformed")),
    _case("malformed_missing", "an empty submission folder", mutate="missing",
          expect=attention("malformed")),
    _case("malformed_binary", "bytes that are not UTF-8", mutate="binary", expect=attention("malformed")),
    _case("malformed_nested", "JSON nested past Python's recursion limit", mutate="nested",
          expect=attention("malformed")),
]


# ---------------------------------------------------------------- mutations

def _cells(nb, gid):
    return [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid]


def mutate(name: str, nb: dict, folder) -> str | bytes | None:
    """Applies a mutation; returns the file content to write (None: nothing)."""
    if name == "edit_tests":
        for c in nb["cells"]:
            if c["metadata"].get("nbgrader", {}).get("grade"):
                c["source"] = "pass\n"
    elif name == "fake_outputs":
        for c in nb["cells"]:
            meta = c["metadata"].get("nbgrader", {})
            if meta.get("grade"):
                meta["points"] = 100
                c["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "all passed\n"}]
                c["execution_count"] = 3
            if meta.get("solution"):
                meta["solution"] = False
        nb["metadata"]["faked"] = True
    elif name == "kernelspec":
        nb["metadata"]["kernelspec"] = {"name": "evil", "display_name": "Evil", "language": "python"}
    elif name == "shadow_files":
        (folder / "autograder.py").write_text("def assert_matches_reference(*a, **k):\n    pass\n")
        (folder / "jax.py").write_text("raise SystemExit('shadowed')\n")
    elif name == "duplicate_solution":
        first = _cells(nb, "corpus_add")[0]
        index = nb["cells"].index(first)
        copy = json.loads(json.dumps(first))
        copy["source"] = WRONG_ADD
        copy.pop("id", None)
        nb["cells"].insert(index, copy)
        nb["nbformat_minor"] = 4
        for c in nb["cells"]:
            c.pop("id", None)
    elif name == "added_cell":
        first = _cells(nb, "corpus_add")[0]
        added = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                 "source": "def _plus(x, y):\n    return x + y\n"}
        if "id" in first:
            added["id"] = "added-by-student"
        nb["cells"].insert(nb["cells"].index(first) + 1, added)
    elif name == "delete_norm2":
        nb["cells"] = [c for c in nb["cells"] if "norm2" not in
                       c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")]
    elif name == "truncate":
        text = json.dumps(nb)
        return text[: len(text) // 2]
    elif name == "not_notebook":
        return json.dumps({"cells": "none", "hello": [1, 2, 3]})
    elif name == "oversize":
        nb["cells"][-1]["outputs"] = [{"output_type": "stream", "name": "stdout",
                                       "text": "x" * 21_000_000}]
    elif name == "missing":
        return b""
    elif name == "nested":
        return "[" * 200_000 + "]" * 200_000
    elif name == "binary":
        return b"\xff\xfe\x00garbage" * 100
    return None
