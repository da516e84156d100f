"""Kernels that talk over Unix sockets in a private folder, never over TCP ports.

jupyter_client's default transport picks five "free" TCP ports on 127.0.0.1 and hands
them to the kernel, which binds them a moment later. Between the two, another kernel
started at the same time can take one of them: the kernel dies with "Address already in
use" and the notebook never runs (seen in CI, with two pytest workers starting kernels
side by side). With the ``ipc`` transport each kernel's channels are socket files in a
folder only this process can open (``mkdtemp``: mode 0700), so there is nothing to race
for, and no other local user can connect to the kernel. The folder lies in ``/tmp``,
not under ``$TMPDIR``, whose path can be long: a Unix socket's path is limited to 107
bytes.

``grader/sandbox/child.py`` does the same inline: it runs without the grader package.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def private_sockets() -> Iterator:
    """A traitlets config selecting the ``ipc`` transport in a fresh private folder;
    pass it as ``NotebookClient(..., config=...)``. The folder is removed on exit."""
    from traitlets.config import Config

    folder = tempfile.mkdtemp(prefix="jaxcourse-kernel-",
                              dir="/tmp" if os.path.isdir("/tmp") else None)
    try:
        yield Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(folder, "k")}})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
