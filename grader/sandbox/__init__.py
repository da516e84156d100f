"""Runs an untrusted notebook in a sandbox and reads back plain, size-capped data.

The public face of the package: ``run_notebook``, ``Limits``, ``RunResult``,
``isolation()``, ``require()``, ``clean_orphans()``, ``SandboxUnavailable``.

- ``run.py``: one run (job folder, launch, wall clock, what came back);
- ``bwrap.py``: the bubblewrap sandbox (no network, no host files, writes only in
  the job folder);
- ``levels.py``: which way to hold memory and task limits this machine offers, in
  order: ``cgroup_v2.py``, ``cgroup_v1.py``, ``systemd.py`` (a user scope),
  ``watchdog.py`` (sampling, plus the rlimits JAX survives);
- ``jobs.py``: job folders and the sweep of what a killed grader left;
- ``child.py``: the notebook driver that runs inside the sandbox.
"""
from grader.sandbox.levels import require
from grader.sandbox.limits import Limits, RunResult, SandboxUnavailable, Stop
from grader.sandbox.run import CHILD, clean_orphans, isolation, run_notebook

__all__ = ["CHILD", "Limits", "RunResult", "SandboxUnavailable", "Stop", "clean_orphans",
           "isolation", "require", "run_notebook"]
