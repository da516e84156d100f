"""What a check observed, as typed plain data: the one format of kernel and grader.

Every check turns what it saw of the student's code into an :class:`Observation`:
a pytree of leaves (arrays, Python scalars, text, PRNG keys), a JSON document of
facts, an error, or an exported program (``jax.export`` bytes). In the student's own
kernel the observation goes through :func:`dumps`/:func:`loads` before it is judged,
exactly as it does when a grading sandbox writes it and the grader reads it back: the
judgement (``explain_*``) sees the same data in both places, so it gives the same
verdict and the same message.

What a sandbox wrote is untrusted. :func:`loads` rebuilds the dataclasses field by
field, checks every type and size, loads arrays with ``allow_pickle=False`` and raises
:class:`WireError` on anything else; it never evaluates what it reads.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from typing import Any

import numpy as np

# Limits of what one test cell may send back (the grader's settings can lower them).
MAX_TEXT = 100_000          # characters of any one string
MAX_RECORDS = 1_000         # checks in one test cell
MAX_LEAVES = 20_000         # leaves in one observation
MAX_ARRAY_BYTES = 64 << 20  # bytes of arrays in one test cell's results
MAX_JSON_BYTES = 16 << 20   # bytes of one test cell's JSON
MAX_REQUIREMENTS = 16       # rubric items named by one record

OBSERVATION_KINDS = ("tree", "facts", "error", "artifact")
LEAF_KINDS = ("array", "scalar", "text", "none", "key", "other")
# dtypes numpy's .npz cannot hold without pickle: stored widened, named as they were.
_WIDEN = {"bfloat16": np.float32, "float8_e4m3fn": np.float32, "float8_e5m2": np.float32,
          "float8_e4m3b11fnuz": np.float32, "float8_e4m3fnuz": np.float32,
          "float8_e5m2fnuz": np.float32, "int4": np.int8, "uint4": np.uint8,
          "float4_e2m1fn": np.float32}


class WireError(ValueError):
    """Data from a sandbox that is not what the format allows."""


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One leaf of an observed pytree.

    ``dtype`` is the dtype's name as the student's code produced it (``bfloat16``
    stays ``bfloat16`` even though the stored values are float32). ``value`` is a
    numpy array for ``array``/``scalar``/``key`` leaves, a string for ``text``, the
    type name for ``other`` and None for ``none``.
    """

    path: str
    kind: str
    dtype: str = ""
    value: Any = None

    @property
    def shape(self) -> tuple:
        return tuple(np.shape(self.value)) if self.kind in ("array", "scalar", "key") else ()


@dataclasses.dataclass(frozen=True)
class Observation:
    """What one check observed: a ``tree``, ``facts``, an ``error`` or an ``artifact``."""

    kind: str
    tree: str = ""
    leaves: tuple = ()
    facts: Any = None
    error_type: str = ""
    error: str = ""
    not_implemented: bool = False
    artifacts: tuple = ()   # serialized programs (``jax.export``), for an "artifact"
    inputs: tuple = ()      # per program: its dynamic inputs (a "tree" observation)
    outputs: tuple = ()     # per program: its outputs on those inputs (derived facts)

    def paths(self) -> list[str]:
        return [leaf.path for leaf in self.leaves]


@dataclasses.dataclass(frozen=True)
class Record:
    """One check call in a test cell: what it is, how to judge it, what it saw.

    ``params`` and ``expected`` are trusted only when they come from the reference
    run (the instructor's notebook); from a student's run only ``observed`` is used.
    """

    kind: str
    label: str
    params: dict
    observed: Observation
    expected: Observation | None = None
    # The rubric items its check judges (the test cell's "# rubric:" lines); trusted
    # from the reference run only, named in the feedback when the check fails.
    requirements: tuple = ()


@dataclasses.dataclass(frozen=True)
class CellResult:
    """The records of one test cell, and why it stopped early (if it did).

    ``hidden_from`` is the index of the first record of the hidden tests (None: the
    cell has none). Only the reference run's is trusted.
    """

    test_id: str
    records: tuple
    stopped: str = ""
    hidden_from: int | None = None


# ---------------------------------------------------------------- observing values

def observe_tree(value: Any) -> Observation:
    """The :class:`Observation` of a pytree of arrays, scalars, strings and keys.

    >>> import jax.numpy as jnp
    >>> obs = observe_tree({"w": jnp.ones(2), "name": "mlp", "n": 3})
    >>> [(leaf.path, leaf.kind, leaf.dtype) for leaf in obs.leaves]
    [("['n']", 'scalar', 'int64'), ("['name']", 'text', ''), ("['w']", 'array', 'float32')]
    """
    import jax

    flat, treedef = jax.tree_util.tree_flatten_with_path(value, is_leaf=lambda x: x is None)
    if len(flat) > MAX_LEAVES:
        raise WireError(f"a result with {len(flat)} leaves (the most allowed is {MAX_LEAVES})")
    leaves = tuple(observe_leaf(jax.tree_util.keystr(path), leaf) for path, leaf in flat)
    return Observation("tree", tree=str(treedef), leaves=leaves)


def observe_leaf(path: str, x: Any) -> Leaf:
    if x is None:
        return Leaf(path, "none")
    if isinstance(x, str):
        return Leaf(path, "text", value=x[:MAX_TEXT])
    if isinstance(x, (bool, int, float, complex)):
        return Leaf(path, "scalar", dtype=str(np.asarray(x).dtype), value=np.asarray(x))
    dtype = getattr(x, "dtype", None)
    if dtype is not None and str(dtype).startswith("key<"):
        import jax

        return Leaf(path, "key", dtype=str(dtype), value=np.asarray(jax.random.key_data(x)))
    if dtype is not None and hasattr(x, "shape"):
        try:
            array = np.asarray(x)
        except Exception:  # noqa: BLE001 - a tracer or a deleted buffer: described, not read
            return Leaf(path, "other", value=type(x).__name__)
        name = str(array.dtype)
        if name in _WIDEN:
            array = array.astype(_WIDEN[name])
        if array.dtype == object:
            return Leaf(path, "other", value=type(x).__name__)
        return Leaf(path, "array", dtype=name, value=array)
    return Leaf(path, "other", value=type(x).__name__)


def observe_facts(facts: Any) -> Observation:
    """Facts are a JSON document (numbers, strings, lists, dicts with string keys)."""
    text = json.dumps(facts, sort_keys=True, allow_nan=True)
    if len(text) > MAX_JSON_BYTES:
        raise WireError("facts too large")
    return Observation("facts", facts=json.loads(text))


def observe_error(err: BaseException) -> Observation:
    text = str(err).strip()
    return Observation("error", error_type=type(err).__name__, error=text[:2000],
                       not_implemented=isinstance(err, NotImplementedError))


# ---------------------------------------------------------------- to bytes and back

class _Writer:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, value: np.ndarray) -> str:
        key = f"a{len(self.arrays)}"
        self.arrays[key] = np.asarray(value, order="C")
        return key

    def observation(self, obs: Observation | None) -> dict | None:
        if obs is None:
            return None
        out: dict[str, Any] = {"kind": obs.kind}
        if obs.kind == "tree":
            out["tree"] = obs.tree
            out["leaves"] = [self.leaf(leaf) for leaf in obs.leaves]
        elif obs.kind == "facts":
            out["facts"] = obs.facts
        elif obs.kind == "error":
            out.update(error_type=obs.error_type, error=obs.error,
                       not_implemented=obs.not_implemented)
        elif obs.kind == "artifact":
            out["artifacts"] = [self.array(np.frombuffer(bytes(b), np.uint8))
                                for b in obs.artifacts]
        if obs.inputs:
            out["inputs"] = [self.observation(o) for o in obs.inputs]
        if obs.outputs:
            out["outputs"] = [self.observation(o) for o in obs.outputs]
        return out

    def leaf(self, leaf: Leaf) -> dict:
        out = {"path": leaf.path, "kind": leaf.kind, "dtype": leaf.dtype}
        if leaf.kind in ("array", "scalar", "key"):
            out["array"] = self.array(np.asarray(leaf.value))
        elif leaf.kind in ("text", "other"):
            out["value"] = str(leaf.value)[:MAX_TEXT]
        return out


def dumps(cell: CellResult) -> tuple[bytes, bytes]:
    """``(json bytes, npz bytes)`` of a test cell's records."""
    writer = _Writer()
    doc = {"test_id": cell.test_id, "stopped": cell.stopped[:MAX_TEXT],
           "hidden_from": cell.hidden_from,
           "records": [{"kind": r.kind, "label": r.label[:MAX_TEXT], "params": r.params,
                        "requirements": [q[:MAX_TEXT] for q in r.requirements[:MAX_REQUIREMENTS]],
                        "observed": writer.observation(r.observed),
                        "expected": writer.observation(r.expected)} for r in cell.records]}
    buffer = io.BytesIO()
    np.savez(buffer, **writer.arrays)
    return json.dumps(doc, allow_nan=True).encode(), buffer.getvalue()


def digest(record: Record) -> str:
    """A hash of everything in ``record`` but its label and rubric items: two records
    with one digest hold the same kind, parameters, observations and arrays (values,
    dtypes and shapes), so whatever is derived from one holds for the other.

    >>> x = Observation("facts", facts={"n": 1})
    >>> digest(Record("k", "a", {}, x)) == digest(Record("k", "b", {}, x))
    True
    >>> digest(Record("k", "a", {}, x)) == digest(Record("k", "a", {"p": 1}, x))
    False
    """
    writer = _Writer()
    doc = {"kind": record.kind, "params": record.params,
           "observed": writer.observation(record.observed),
           "expected": writer.observation(record.expected)}
    h = hashlib.sha256(json.dumps(doc, sort_keys=True, allow_nan=True).encode())
    for key, value in writer.arrays.items():
        h.update(f"\0{key}:{value.dtype.str}:{value.shape}\0".encode())
        h.update(value.tobytes())
    return h.hexdigest()


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise WireError(what)


def _text(value: Any, what: str, limit: int = MAX_TEXT) -> str:
    _need(isinstance(value, str) and len(value) <= limit, f"{what} is not a string")
    return value


class _Reader:
    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays
        self.used = 0

    def array(self, key: Any) -> np.ndarray:
        _need(isinstance(key, str) and key in self.arrays, f"missing array {key!r}")
        value = self.arrays[key]
        self.used += value.nbytes
        _need(self.used <= MAX_ARRAY_BYTES, "arrays too large")
        return value

    def observation(self, doc: Any, depth: int = 0) -> Observation | None:
        if doc is None:
            return None
        _need(isinstance(doc, dict) and doc.get("kind") in OBSERVATION_KINDS and depth < 2,
              "not an observation")
        if depth and doc.get("kind") != "tree":
            raise WireError("nested observations must be trees")
        kind = doc["kind"]
        if kind == "tree":
            leaves = doc.get("leaves")
            _need(isinstance(leaves, list) and len(leaves) <= MAX_LEAVES, "bad leaves")
            return Observation("tree", tree=_text(doc.get("tree"), "tree"),
                               leaves=tuple(self.leaf(leaf) for leaf in leaves))
        nested = {}
        for field in ("inputs", "outputs"):
            items = doc.get(field, [])
            _need(isinstance(items, list) and len(items) <= 64 and depth < 1, f"bad {field}")
            nested[field] = tuple(self.observation(o, depth + 1) for o in items)
            _need(all(o is not None and o.kind == "tree" for o in nested[field]),
                  f"bad {field}")
        if kind == "facts":
            return Observation("facts", facts=_json_only(doc.get("facts")), **nested)
        if kind == "error":
            _need(isinstance(doc.get("not_implemented"), bool), "bad error flag")
            return Observation("error", error_type=_text(doc.get("error_type"), "error type", 200),
                               error=_text(doc.get("error"), "error", 5000),
                               not_implemented=doc["not_implemented"])
        blobs = doc.get("artifacts")
        _need(isinstance(blobs, list) and 0 < len(blobs) <= 64, "bad artifacts")
        arrays = [self.array(key) for key in blobs]
        _need(all(a.dtype == np.uint8 and a.ndim == 1 for a in arrays), "bad artifact")
        return Observation("artifact", artifacts=tuple(a.tobytes() for a in arrays), **nested)

    def leaf(self, doc: Any) -> Leaf:
        _need(isinstance(doc, dict) and doc.get("kind") in LEAF_KINDS, "not a leaf")
        kind = doc["kind"]
        path, dtype = _text(doc.get("path"), "path", 10_000), _text(doc.get("dtype"), "dtype", 100)
        if kind in ("array", "scalar", "key"):
            value = self.array(doc.get("array"))
            _need(value.dtype != object, "object array")
            if kind == "scalar":
                _need(value.ndim == 0 and value.dtype.kind in "biufc", "bad scalar")
            return Leaf(path, kind, dtype, value)
        if kind == "none":
            return Leaf(path, kind, dtype)
        return Leaf(path, kind, dtype, _text(doc.get("value"), "leaf value"))


def _json_only(value: Any, depth: int = 0) -> Any:
    """Checks that a decoded JSON value is made of plain JSON types (it always is,
    unless someone hands us something else) and not absurdly deep."""
    _need(depth < 64, "facts nested too deep")
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _text(value, "fact")
    if isinstance(value, list):
        return [_json_only(v, depth + 1) for v in value]
    if isinstance(value, dict):
        _need(all(isinstance(k, str) for k in value), "fact keys must be strings")
        return {k: _json_only(v, depth + 1) for k, v in value.items()}
    raise WireError("facts hold a value that is not JSON")


def _arrays(raw_npz: bytes) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` that :func:`dumps` wrote, read with bounded memory.

    Nothing is decompressed: :func:`dumps` stores members uncompressed, so a member
    that claims any compression (a deflate or bzip2 bomb) is refused from the zip
    directory before a byte of it is read. Each member's ``.npy`` header is read and
    its shape and dtype must account for exactly the member's stored bytes, checked
    before the array is allocated: what is decoded is never larger than the file.
    """
    import zipfile

    try:
        archive = zipfile.ZipFile(io.BytesIO(raw_npz))
        members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError, OSError):
        raise WireError("unreadable results: not an npz file") from None
    _need(len(members) <= 4 * MAX_LEAVES, "too many arrays")
    arrays: dict[str, np.ndarray] = {}
    total = 0
    for info in members:
        _need(info.compress_type == zipfile.ZIP_STORED,
              f"array {info.filename!r} is compressed (results are stored uncompressed)")
        _need(info.file_size == info.compress_size and info.file_size <= len(raw_npz),
              f"array {info.filename!r} declares a size its file does not have")
        total += info.file_size
        _need(total <= MAX_ARRAY_BYTES + 4096 * len(members), "arrays too large")
        _need(info.filename.endswith(".npy") and len(info.filename) <= 64,
              "not an array member")
        key = info.filename[:-4]
        try:
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                _need(version in ((1, 0), (2, 0), (3, 0)), "unknown array format")
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = read_header(member, max_header_size=10_000)
                _need(not dtype.hasobject and dtype.fields is None, "object array")
                _need(len(shape) <= 32, "too many dimensions")
                nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
                _need(nbytes == info.file_size - member.tell(),
                      f"array {key!r}: its header does not match its size")
                buffer = np.empty(nbytes, np.uint8)
                got = member.readinto(memoryview(buffer)) if nbytes else 0
                _need(got == nbytes, f"array {key!r} is truncated")
                arrays[key] = buffer.view(dtype).reshape(shape, order="F" if fortran else "C")
        except WireError:
            raise
        except Exception as err:  # noqa: BLE001 - any parse error is a wire error
            raise WireError(f"unreadable results: {type(err).__name__}") from None
    return arrays


def loads(raw_json: bytes, raw_npz: bytes) -> CellResult:
    """Decodes what :func:`dumps` wrote, trusting nothing; raises :class:`WireError`.

    Memory stays bounded by the input: the JSON is refused past ``MAX_JSON_BYTES``
    before it is parsed, and arrays are read as :func:`_arrays` says.
    """
    _need(len(raw_json) <= MAX_JSON_BYTES, "results too large")
    arrays = _arrays(raw_npz)
    try:
        doc = json.loads(raw_json)
    except Exception as err:  # noqa: BLE001 - any parse error (RecursionError too)
        raise WireError(f"unreadable results: {type(err).__name__}") from None
    _need(isinstance(doc, dict), "results are not an object")
    records = doc.get("records")
    _need(isinstance(records, list) and len(records) <= MAX_RECORDS, "bad records")
    reader = _Reader(arrays)
    out = []
    for item in records:
        _need(isinstance(item, dict) and isinstance(item.get("params"), dict), "bad record")
        observed = reader.observation(item.get("observed"))
        _need(observed is not None, "record without observation")
        out.append(Record(kind=_text(item.get("kind"), "kind", 100),
                          label=_text(item.get("label"), "label"),
                          params=_json_only(item["params"]),
                          observed=observed, expected=reader.observation(item.get("expected")),
                          requirements=_requirements(item.get("requirements", []))))
    hidden_from = doc.get("hidden_from")
    _need(hidden_from is None or (type(hidden_from) is int and 0 <= hidden_from <= len(out)),
          "bad hidden_from")
    return CellResult(test_id=_text(doc.get("test_id"), "test id", 200), records=tuple(out),
                      stopped=_text(doc.get("stopped", ""), "stopped"), hidden_from=hidden_from)


def _requirements(value: Any) -> tuple:
    _need(isinstance(value, list) and len(value) <= MAX_REQUIREMENTS, "bad requirements")
    return tuple(_text(q, "requirement") for q in value)


def roundtrip(obs: Observation) -> Observation:
    """An observation as the grader would read it back (the kernel judges this)."""
    raw_json, raw_npz = dumps(CellResult("kernel", (Record("roundtrip", "", {}, obs),)))
    return loads(raw_json, raw_npz).records[0].observed
