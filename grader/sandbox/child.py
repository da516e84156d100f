"""Runs inside the sandbox: executes one notebook with nbclient, cell by cell.

Started as a script (``python child.py JOB_DIR CELL_TIMEOUT OUTPUT_BYTES``),
not as ``-m autograder...``, so that it never imports the autograder package or JAX
itself. It reads ``JOB_DIR/in.ipynb`` and writes ``JOB_DIR/out.ipynb`` plus a
progress log ``JOB_DIR/progress.jsonl`` (one line per cell started and finished), so
that the grader outside knows which cell was running when the sandbox was killed.

Nothing written here is trusted: the student's kernel shares this sandbox and may
have rewritten any of it. The grader treats every file as untrusted, size-capped data.

What the kernel can reach of the grader's test cells is kept to the cell that runs:
``in.ipynb`` is removed once read (a solution cell cannot read every hidden test from
it), this process is made non-dumpable (the kernel, same user, cannot read its memory
through ``/proc``), and test cells (tagged ``jaxcourse_test``) run without entering the
kernel's input history (``In``, ``_ih``).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time

EXIT_OK, EXIT_TIMEOUT, EXIT_DIED, EXIT_FAILED, EXIT_FLOOD, EXIT_MEMORY = 0, 3, 4, 5, 6, 7


def main() -> int:
    job, cell_timeout, output_bytes = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    # A lean start: nbformat imports jsonschema, whose optional IRI format checker
    # (rfc3987_syntax, pulled in by jupyter_events) compiles a grammar at import time,
    # about 1 s of every sandbox run. jsonschema skips that checker when the import
    # fails, and notebooks are never validated against IRI formats.
    sys.modules.setdefault("rfc3987_syntax", None)
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    progress = open(os.path.join(job, "progress.jsonl"), "a", buffering=1)

    def log(**event) -> None:
        progress.write(json.dumps(event) + "\n")

    class CappedClient(NotebookClient):
        """Drops outputs past a byte budget while they stream, keeping one notice."""

        streamed = 0
        capped = False

        def output(self, outs, msg, display_id, cell_index):
            size = len(json.dumps(msg.get("content", {}), default=str))
            self.streamed += size
            if self.streamed > 20 * output_bytes:
                # A flood, not a chatty cell: stop here; the grader kills the sandbox.
                log(event="flood", cell=cell_index)
                os._exit(EXIT_FLOOD)
            if self.streamed > output_bytes:
                if not self.capped:
                    self.capped = True
                    log(event="output_capped", cell=cell_index)
                    outs.append(nbformat.v4.new_output(
                        "stream", name="stderr",
                        text=f"[output limit of {output_bytes} bytes reached: "
                             "later output of this notebook was dropped]\n"))
                return None
            return super().output(outs, msg, display_id, cell_index)

    nb = nbformat.read(os.path.join(job, "in.ipynb"), as_version=4)
    os.unlink(os.path.join(job, "in.ipynb"))
    _not_dumpable()
    # The kernel's channels: Unix sockets in a private folder, not TCP ports that a
    # kernel started at the same moment could take (see grader/kernels.py, which this
    # script cannot import). In the sandbox /tmp is the job's own; $TMPDIR's long path
    # could pass the 107-byte limit of a socket's path.
    from traitlets.config import Config

    sockets = tempfile.mkdtemp(prefix="kernel-", dir="/tmp" if os.path.isdir("/tmp") else None)
    client = CappedClient(nb, timeout=cell_timeout, kernel_name="python3",
                          config=Config({"KernelManager": {
                              "transport": "ipc", "ip": os.path.join(sockets, "k")}}),
                          allow_errors=True, interrupt_on_timeout=False,
                          resources={"metadata": {"path": job}}, record_timing=True)
    code = EXIT_OK
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            log(event="start", cell=index, t=time.time())
            secret = "jaxcourse_test" in cell.get("metadata", {})
            try:
                client.execute_cell(cell, index, store_history=not secret)
            except CellTimeoutError:
                log(event="timeout", cell=index)
                code = EXIT_TIMEOUT
                break
            except DeadKernelError:
                log(event="died", cell=index)
                code = EXIT_DIED
                break
            except Exception as err:  # noqa: BLE001 - reported, the grader decides
                log(event="failed", cell=index, error=repr(err)[:500])
                code = EXIT_FAILED
                break
            if any(o.get("output_type") == "error" and o.get("ename") == "MemoryError"
                   for o in cell.get("outputs", [])):
                # An allocation refused (the address-space limit, or more than the
                # machine has): reported as out of memory, like a cgroup's kill.
                log(event="memory_error", cell=index)
                code = EXIT_MEMORY
                break
            log(event="done", cell=index)
            if secret:
                cell.source = ""  # the grader rebuilds test cells; out.ipynb holds none
        nbformat.write(nb, os.path.join(job, "out.ipynb"))
        log(event="end", code=code)
        shutil.rmtree(sockets, ignore_errors=True)
        # Never wait for a kernel that ignores shutdown: the grader kills the sandbox.
        os._exit(code)
    return code


def _not_dumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): /proc/PID/mem, environ and fd of this process are no
    longer readable by the kernel it starts. A no-op where prctl is missing."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
