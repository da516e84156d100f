"""The grader's settings, in one place: ``c.Grading.*`` in nbgrader_config.py.

Every limit the pipeline applies is a documented traitlets option here (nbgrader's
own habit: ``LimitOutput.max_lines``, ``Execute.timeout``), read from the course's
``nbgrader_config.py`` like nbgrader's options, so an instructor changes a value in one
file and nowhere else. The course's config sets ``c.Execute.timeout`` from
``c.Grading.cell_timeout`` and the sandbox's stub from ``c.ClearSolutions.code_stub``,
so no value is written twice.
"""
from __future__ import annotations

import os
from pathlib import Path

from traitlets import Float, Int
from traitlets.config import Config, Configurable


class Grading(Configurable):
    """Limits and sizes of ``python -m autograder grade`` (``make autograde``)."""

    cell_timeout = Float(60.0, help="Seconds one cell may run in the grading sandbox "
                                    "(plain nbgrader's Execute.timeout is set from it)."
                         ).tag(config=True)
    notebook_timeout = Float(600.0, help="Seconds one notebook may run in the sandbox, all "
                                         "cells together; then its process tree is killed."
                             ).tag(config=True)
    memory_mb = Int(3072, help="Memory of one sandbox (MiB), files it writes included."
                    ).tag(config=True)
    tasks = Int(0, help="Processes and threads of one sandbox; 0: 256 + 16 per CPU "
                        "(XLA starts a thread per core and then some).").tag(config=True)
    output_bytes = Int(2_000_000, help="Bytes of output kept per notebook while it "
                                       "streams; 20 times more stops it as a flood."
                       ).tag(config=True)
    read_bytes = Int(16_000_000, help="The most read back from any one file a sandbox "
                                      "wrote.").tag(config=True)
    text_limit = Int(100_000, help="Characters kept of any one string a sandbox returns "
                                   "(results, outputs shown in the Formgrader)."
                     ).tag(config=True)
    max_notebook_bytes = Int(20_000_000, help="A submitted notebook larger than this is "
                                              "malformed.").tag(config=True)
    max_runs = Int(5, help="Runs of one notebook when cells hang or crash (each run "
                           "leaves the offending cell out).").tag(config=True)
    record_chunk = Int(25, help="Submissions recorded in the gradebook per nbgrader call "
                                "while the batch runs.").tag(config=True)
    workers = Int(0, help="Parallel sandboxes on this machine; 0: one and a half per core "
                          "(at least one more than the cores), as many as the available "
                          "memory holds at memory_mb each.").tag(config=True)
    judge_batch = Int(4, min=1, help="Submissions whose exported programs one program-judge "
                                     "sandbox judges (each such sandbox starts JAX; 1: one "
                                     "per submission, verdicts soonest).").tag(config=True)
    seed = Int(20261203, help="Seed of the inputs hidden checks draw (autograder.draw): "
                              "the reference run and every submission draw the same ones. "
                              "Change it per term so last term's inputs say nothing."
               ).tag(config=True)

    def sandboxes(self) -> int:
        """How many sandboxes run at once: ``workers``, or by default one and a half per
        core. A sandbox's CPU is idle about a quarter of its time (its kernel starting,
        messages between the notebook driver and the kernel): with one per core, a
        2-core machine was 25-35 % idle while grading (vmstat), and 3 sandboxes graded
        03_jit's class of 24 in 49 s against 57 s. Never more than the available memory
        holds at ``memory_mb`` each (and a warning below if ``workers`` asks for more).
        """
        if self.workers:
            return self.workers
        from grader.sandbox.watchdog import host_available_mb

        cores = os.cpu_count() or 1
        available, _ = host_available_mb()
        fits = int(available // self.memory_mb) if available != float("inf") else cores * 2
        return max(1, min(cores + max(1, cores // 2), fits))

    def limits(self):
        from grader.sandbox import Limits

        return Limits(cell_timeout=self.cell_timeout, notebook_timeout=self.notebook_timeout,
                      memory_mb=self.memory_mb, tasks=self.tasks,
                      output_bytes=self.output_bytes, read_bytes=self.read_bytes)


def course_config(course: os.PathLike) -> Config:
    """The traitlets config of a course folder (its nbgrader_config.py)."""
    from traitlets.config.loader import PyFileConfigLoader

    path = Path(course) / "nbgrader_config.py"
    if not path.exists():
        return Config()
    return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()


def settings(course: os.PathLike) -> Grading:
    """The :class:`Grading` settings of a course folder."""
    return Grading(config=course_config(course))


def solution_stub(course: os.PathLike) -> str:
    """What a release notebook holds in place of a solution (``ClearSolutions.code_stub``)."""
    from grader.notebook import DEFAULT_STUB

    stub = course_config(course).get("ClearSolutions", {}).get("code_stub", {})
    return stub.get("python", DEFAULT_STUB) if isinstance(stub, dict) else DEFAULT_STUB
