"""`make lab` serves JupyterLab with nbgrader's Assignment List and Validate enabled."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request

from tests.conftest import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_serves_course_with_nbgrader_extensions(tmp_path):
    port, token = _free_port(), "course-test-token"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    args = (f"--no-browser --ip=127.0.0.1 --IdentityProvider.token={token} "
            f"--Exchange.root={tmp_path / 'exchange'}")
    proc = subprocess.Popen(["make", "lab", f"LAB_PORT={port}", f"LAB_ARGS={args}"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        page = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}",
                                            timeout=5) as r:
                    page = r.read().decode()
                break
            except OSError:
                time.sleep(1)
        assert page is not None, f"JupyterLab did not start:\n{proc.stdout.read() if proc.poll() is not None else ''}"
        config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">'
                                      r"(.*?)</script>", page, re.S).group(1))
        names = [e["name"] for e in config.get("federated_extensions", [])]
        assert "@jupyter/nbgrader" in names, names
        disabled = config.get("disabledExtensions", [])
        for plugin in ("@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:validate-assignment"):
            assert not any(plugin.startswith(d.split(":")[0]) and (d == plugin or ":" not in d)
                           for d in disabled), f"{plugin} is disabled: {disabled}"
        # The server side of both extensions answers.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/assignments?course_id=jax-xla&token={token}",
                                    timeout=30) as r:
            assert r.status == 200
        # The default view is the student notebooks.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/?token={token}", timeout=30) as r:
            assert r.url.split("?")[0].endswith("/lab/tree/release"), r.url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
