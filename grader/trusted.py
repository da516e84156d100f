"""Trusted scoring: rebuild a submission, run it sandboxed, judge plain data outside.

For each graded test cell, the assignment's spec (``grader/specs/<assignment>.py``)
lists probes: expressions the grader evaluates in the student's namespace, inside the
sandbox, on inputs of its choosing. What comes back is plain data (``.npz`` read with
``allow_pickle=False`` and JSON, size-capped). The same probes evaluated on the
instructor's source notebook give the reference values, once per assignment. A test
cell passes when every probe's value matches its reference (and its extra check, if
any): decided here, by code the submission never runs next to.

The notebook that runs is rebuilt from the instructor's source: only the source of
the solution cells comes from the submission; hidden tests are cut out of the test
cells (the visible part still runs, for the student's own feedback).
"""
from __future__ import annotations

import copy
import dataclasses
import importlib.util
import io
import json
import re
from pathlib import Path
from typing import Callable

import numpy as np

from autograder._feedback import format_failure
from autograder._numeric import _leaf_failure

SPECS = Path(__file__).with_name("specs")
_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?",
                     re.M | re.S)
_PROBE_TAG = "jaxcourse_probe"


@dataclasses.dataclass(frozen=True)
class Probe:
    """One value the grader asks a submission for, and how to judge it.

    ``expr`` is evaluated in the notebook's namespace after ``setup`` (which may
    build inputs). ``rtol``/``atol``/``dtype`` judge arrays as the in-notebook checks
    do; ``check(got, expected)`` may add a rule and returns a message or None.
    ``values=False`` compares structure, shapes and dtypes only (e.g. samples).
    """

    expr: str
    setup: str = ""
    name: str = ""
    rtol: float = 1e-5
    atol: float = 1e-6
    dtype: str | None = "kind"
    values: bool = True
    check: Callable | None = None
    compare: bool = True  # False: only ``check`` decides (facts with no reference)
    hint: str | None = None
    fix: str | None = None
    section: str | None = None

    @property
    def label(self) -> str:
        """What feedback calls the probe: its name, or the call without its arguments.

        >>> Probe("newton_step(_rosen, jnp.array([1.0, 2.0]))").label
        'newton_step(...)'
        >>> Probe("jax.grad(td_loss)(*_args)").label
        'jax.grad(td_loss)(...)'
        """
        if self.name:
            return self.name
        expr = self.expr.strip()
        if expr.endswith(")"):
            depth = 0
            for i in range(len(expr) - 1, -1, -1):
                depth += {")": 1, "(": -1}.get(expr[i], 0)
                if depth == 0:
                    return expr[:i] + "(...)"
        return expr


@dataclasses.dataclass
class Verdict:
    passed: bool
    message: str = ""


# ---------------------------------------------------------------- specs

def spec_path(assignment: str, specs_dir: str | Path | None = None) -> Path:
    return Path(specs_dir or SPECS) / f"{assignment}.py"


def load_spec(assignment: str, specs_dir: str | Path | None = None) -> dict[str, list[Probe]]:
    """``{test grade_id: [Probe, ...]}`` from ``grader/specs/<assignment>.py``."""
    path = spec_path(assignment, specs_dir)
    if not path.exists():
        raise FileNotFoundError(f"no grading spec for {assignment}: expected {path}")
    module_spec = importlib.util.spec_from_file_location(f"_jaxcourse_spec_{assignment}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.PROBES


# ---------------------------------------------------------------- notebooks

def _meta(cell) -> dict:
    """The nbgrader metadata of a cell; ``{}`` when absent or malformed."""
    md = cell.get("metadata") if isinstance(cell, dict) else None
    nbg = md.get("nbgrader") if isinstance(md, dict) else None
    return nbg if isinstance(nbg, dict) else {}


def is_solution(cell) -> bool:
    m = _meta(cell)
    return bool(m.get("solution")) and not m.get("grade") and cell.get("cell_type") == "code"


def is_test(cell) -> bool:
    m = _meta(cell)
    return bool(m.get("grade")) and not m.get("solution") and cell.get("cell_type") == "code"


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


def submitted_solutions(submission: dict | None, wanted=None) -> dict[str, str]:
    """``{grade_id: source}`` of the solution cells of a submission (first one wins).

    With ``wanted`` (the source's solution ids), a cell counts by its grade_id alone:
    a submission that flips a cell's flags in its metadata still has that cell read.
    """
    found: dict[str, str] = {}
    cells = submission.get("cells", []) if isinstance(submission, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        gid = _meta(cell).get("grade_id")
        if not isinstance(gid, str) or gid in found:
            continue
        if (gid in wanted) if wanted is not None else is_solution(cell):
            found[gid] = _text(cell.get("source"))
    return found


def rebuild(source_nb: dict, solutions: dict[str, str], stubs: dict[str, str]) -> dict:
    """The instructor's notebook with the submission's solution sources in it.

    A solution cell missing from the submission gets the release stub. Outputs and
    execution counts are cleared; nothing else of the submission is used.
    """
    nb = copy.deepcopy(source_nb)
    for cell in nb["cells"]:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        if is_solution(cell):
            gid = _meta(cell)["grade_id"]
            cell["source"] = solutions.get(gid, stubs.get(gid, ""))
    return nb


def is_try_it(cells: list, index: int) -> bool:
    """A plain code cell right after a solution cell: where students try their code."""
    cell = cells[index]
    return (index > 0 and cell.get("cell_type") == "code" and not _meta(cell)
            and is_solution(cells[index - 1]))


def sandbox_notebook(rebuilt: dict, spec: dict[str, list[Probe]],
                     skipped: dict[int, str] | None = None,
                     skipped_probes: set[str] = frozenset(), lean: bool = True) -> dict:
    """What runs in the sandbox: no hidden tests, probe cells appended.

    ``lean`` (the default) also leaves out what grading does not need: the visible
    tests (the verdicts replace them in feedback) and the try-it cells. Lessons,
    the setup and the solutions run as the student ran them.
    """
    nb = copy.deepcopy(rebuilt)
    cells = nb["cells"]
    for index, cell in enumerate(cells):
        if is_test(cell):
            cell["source"] = "" if lean else _HIDDEN.sub("", _text(cell["source"]))
        elif lean and is_try_it(cells, index):
            cell["source"] = ""
        if skipped and index in skipped:
            cell["source"] = f"# not run by the grader: {skipped[index]}\n"
    for test_id, probes in spec.items():
        if test_id in skipped_probes:
            continue
        payload = [(p.label, p.setup, p.expr) for p in probes]
        nb["cells"].append({
            "cell_type": "code", "execution_count": None, "outputs": [],
            "metadata": {_PROBE_TAG: test_id},
            "source": ("from autograder._probe import run as _jaxcourse_probe\n"
                       f"_jaxcourse_probe({test_id!r}, {payload!r}, globals())\n")})
    return nb


def probe_files(spec: dict) -> tuple[str, ...]:
    return tuple(f"probe/{t}.{ext}" for t in spec for ext in ("json", "npz"))


# ---------------------------------------------------------------- decoding

def decode(files: dict[str, bytes], test_id: str) -> list[dict] | None:
    """The probe results of one test cell, arrays resolved; None when unusable."""
    raw_json, raw_npz = files.get(f"probe/{test_id}.json"), files.get(f"probe/{test_id}.npz")
    if raw_json is None or raw_npz is None:
        return None
    try:
        data = json.loads(raw_json)
        arrays = np.load(io.BytesIO(raw_npz), allow_pickle=False)
        arrays = {k: arrays[k] for k in arrays.files}
    except Exception:  # noqa: BLE001 - corrupt data is the submission's problem
        return None
    if not isinstance(data, dict) or not isinstance(data.get("probes"), list):
        return None
    out = []
    for item in data["probes"]:
        if not isinstance(item, dict):
            return None
        if item.get("ok"):
            leaves = []
            for leaf in item.get("leaves", []) if isinstance(item.get("leaves"), list) else []:
                if not isinstance(leaf, dict):
                    return None
                kind = leaf.get("kind")
                if kind in ("array", "key"):
                    if leaf.get("key") not in arrays:
                        return None
                    leaves.append((str(leaf.get("path")), kind, arrays[leaf["key"]]))
                else:
                    leaves.append((str(leaf.get("path")), kind, leaf.get("value", leaf.get("type"))))
            out.append({"ok": True, "tree": str(item.get("tree")), "leaves": leaves})
        else:
            out.append({"ok": False, "error_type": str(item.get("error_type"))[:100],
                        "error": str(item.get("error"))[:2000]})
    return out


def _value(leaves: list) -> object:
    """A probe's value for ``check``: the single leaf, or ``{path: leaf}``."""
    if len(leaves) == 1:
        return leaves[0][2]
    return {path: value for path, _, value in leaves}


# ---------------------------------------------------------------- judging

def judge_probe(probe: Probe, got: dict | None, expected: dict) -> str | None:
    """Returns the teaching message of a failed probe, or None when it passes."""
    label = f"{probe.label} on the grader's inputs"
    teach = dict(section=probe.section)
    if got is None:
        return format_failure(f"{label}: no result came back", **teach)
    if not got["ok"]:
        if got["error_type"] == "NotImplementedError":
            return format_failure(f"{label}: not implemented yet", **teach)
        return format_failure(f"{label} raised {got['error_type']}: {got['error']}",
                              fix=probe.fix, **teach)
    if not expected.get("ok"):
        raise RuntimeError(f"the reference solution fails probe {probe.label}: "
                           f"{expected.get('error_type')}: {expected.get('error')}")
    if probe.compare:
        if got["tree"] != expected["tree"] or len(got["leaves"]) != len(expected["leaves"]):
            return format_failure(f"{label} returned a different structure",
                                  expected=expected["tree"], got=got["tree"],
                                  cause=probe.hint, fix=probe.fix, **teach)
        problems = []
        for (path, gkind, g), (_, ekind, e) in zip(got["leaves"], expected["leaves"]):
            where = path or "result"
            if gkind != ekind:
                got_text = ("None (is a return statement missing?)" if gkind == "json" and g is None
                            else f"{g!r}" if gkind == "json" else f"a {gkind}")
                want = "an array" if ekind == "array" else f"a {ekind}"
                problems.append(f"{where}: expected {want}, got {got_text}")
                continue
            if ekind == "json":
                if not _json_equal(g, e, probe.rtol, probe.atol):
                    problems.append(f"{where}: expected {e!r}, got {g!r}")
                continue
            if ekind == "unsupported":
                continue
            res = _leaf_failure(g, e, rtol=probe.rtol, atol=probe.atol,
                                dtype=probe.dtype if ekind == "array" else "exact",
                                values=probe.values)
            if res is not None:
                problems.append(f"{where}: {res[1]}")
        if problems:
            return format_failure(f"{label} does not match the reference solution",
                                  details=problems[:8], cause=probe.hint, fix=probe.fix, **teach)
    if probe.check is not None:
        try:
            problem = probe.check(_value(got["leaves"]), _value(expected["leaves"]))
        except Exception as err:  # noqa: BLE001 - the facts came from the sandbox
            problem = (f"the grader could not read this result "
                       f"({type(err).__name__}: {str(err)[:200]})")
        if problem:
            return format_failure(f"{label}: {problem}", cause=probe.hint, fix=probe.fix, **teach)
    return None


def _json_equal(got, expected, rtol: float, atol: float) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool) or expected is None:
        return got == expected and type(got) is type(expected)
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        return abs(got - expected) <= atol + rtol * abs(expected)
    return got == expected


def judge(spec: dict[str, list[Probe]], files: dict[str, bytes],
          reference: dict[str, list[dict]], incidents: dict[str, str]) -> dict[str, Verdict]:
    """One verdict per test cell of the spec."""
    verdicts = {}
    for test_id, probes in spec.items():
        if test_id in incidents:
            verdicts[test_id] = Verdict(False, incidents[test_id])
            continue
        results = decode(files, test_id)
        if results is None or len(results) != len(probes):
            verdicts[test_id] = Verdict(False, format_failure(
                "the grader got no usable result for this exercise",
                cause="the notebook stopped before the grader's checks ran, "
                      "or the submission interfered with them"))
            continue
        messages = [m for p, g, e in zip(probes, results, reference[test_id])
                    if (m := judge_probe(p, g, e))]
        verdicts[test_id] = Verdict(not messages, "\n\n".join(messages[:3]))
    return verdicts
