"""Recording judged submissions in the gradebook, through nbgrader, while the batch runs."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from grader.course import run_nbgrader
from grader.ledger import _notebook_names, grading_dir

# ---------------------------------------------------------------- recording

def _stage(course: Path, assignment: str, folder: Path, student: str, result: dict) -> None:
    """Writes the rebuilt notebooks (for nbgrader) and the bundles (for TrustedReplay)."""
    folder = folder / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    # timestamp.txt: the late penalty; submission_secret.txt (written by nbgrader
    # collect): nbgrader copies it to autograded/ and feedback/, and release_feedback
    # refuses a student's feedback without it.
    for name in ("timestamp.txt", "submission_secret.txt"):
        small = Path(course) / "submitted" / student / assignment / name
        if small.is_file() and small.stat().st_size < 200:
            shutil.copyfile(small, folder / name)
    bundle_dir = grading_dir(course, assignment) / "bundles" / student
    bundle_dir.mkdir(parents=True, exist_ok=True)
    for name, bundle in result["bundles"].items():
        (folder / name).write_text(json.dumps(bundle["rebuilt"]))
        (bundle_dir / f"{Path(name).stem}.json").write_text(json.dumps(bundle))


def _bundles_of(course: Path, assignment: str, student: str) -> dict:
    """A judged submission's result, read back from its bundles (to resume)."""
    bundle_dir = grading_dir(course, assignment) / "bundles" / student
    return {"bundles": {name: json.loads((bundle_dir / f"{Path(name).stem}.json").read_text())
                        for name in _notebook_names(course, assignment)}}


class _Recorder:
    """Writes judged submissions into the gradebook in chunks, while the batch runs.

    One ``python -m grader.recorder`` process for the whole batch calls nbgrader's
    API (``NbGraderAPI.autograde``) on each staged submission, with the
    ``TrustedReplay`` preprocessor in place of execution (nbgrader_config.py selects
    it when ``JAXCOURSE_BUNDLES`` is set). It starts with the batch, so importing
    nbgrader overlaps the reference run; it is the gradebook's one writer. A chunk is
    sent as soon as a worker is idle at the batch's end, or when ``chunk``
    submissions wait: a large class never ends with one long recording.
    """

    def __init__(self, course: Path, assignment: str, run_dir: Path, on_recorded,
                 chunk: int = 25):
        import queue
        import subprocess
        import sys
        import threading

        from grader.course import nbgrader_env

        self.course, self.assignment, self.run_dir = course, assignment, run_dir
        self.on_recorded = on_recorded  # (student, (score, max score) or None)
        self.chunk_size = chunk
        bundles = grading_dir(course, assignment) / "bundles"
        run_dir.mkdir(parents=True, exist_ok=True)
        self.log = open(run_dir / "nbgrader.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grader.recorder"], cwd=course,
            env={**nbgrader_env(), "JAXCOURSE_BUNDLES": str(bundles.resolve())},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.staged: list[str] = []
        self.chunk = 0
        self.running: list[str] | None = None
        self.results: dict[str, dict] = {}

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.answers.put(json.loads(line))
            except ValueError:
                continue
        self.answers.put(None)  # the process ended

    def stage(self, student: str, result: dict | None = None) -> None:
        result = result or _bundles_of(self.course, self.assignment, student)
        _stage(self.course, self.assignment, self.run_dir / f"chunk{self.chunk}", student, result)
        self.staged.append(student)

    def poll(self, tail: bool, wait: float = 0.0) -> None:
        """Collects answers; sends the next chunk when it is worth it."""
        import queue

        while self.running is not None:
            try:
                answer = self.answers.get(timeout=wait) if wait else self.answers.get_nowait()
            except queue.Empty:
                break
            if answer is None or answer.get("done"):
                self._collect()
            elif "student" in answer:
                self.results[answer["student"]] = answer
        if self.running is None and self.staged and (tail or len(self.staged) >= self.chunk_size):
            folder = self.run_dir / f"chunk{self.chunk}" / "submitted"
            request = {"assignment": self.assignment, "submitted": str(folder),
                       "students": self.staged}
            try:
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # the recorder died: its students are reported as not recorded
            self.running, self.staged, self.chunk = self.staged, [], self.chunk + 1

    def _collect(self) -> None:
        students, self.running = self.running, None
        recorded = _scores(self.course, self.assignment,
                           [s for s in students if self.results.get(s, {}).get("success")])
        for s in students:
            self.on_recorded(s, recorded.get(s))

    def finish(self) -> None:
        """Records everything staged; returns when the gradebook has it all (then close())."""
        while self.running is not None or self.staged:
            if self.running is None:
                self.poll(tail=True)
            elif self.proc.poll() is not None and self.answers.empty():
                self._collect()  # the recorder died mid-chunk
            else:
                self.poll(tail=True, wait=0.5)

    def close(self) -> None:
        """Lets the process exit; kills it if a chunk is still running (interrupted batch)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        if self.running is not None:  # interrupted: those stay judged, recorded next run
            self.proc.kill()
        try:
            self.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - never leave a process behind
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _scores(course: Path, assignment: str, students: list[str]) -> dict[str, tuple[float, float]]:
    from nbgrader.api import Gradebook, MissingEntry

    from grader.course import nbgrader_db_url

    out = {}
    with Gradebook(nbgrader_db_url(course)) as gb:
        for s in students:
            try:
                sub = gb.find_submission(assignment, s)
            except MissingEntry:
                continue
            autograded = Path(course) / "autograded" / s / assignment
            if autograded.is_dir():
                out[s] = (float(sub.score), float(sub.max_score))
    return out


def ensure_in_gradebook(course: Path, assignment: str) -> None:
    """Registers the assignment's source notebooks in the gradebook when missing.

    nbgrader autograde restores locked cells and hidden tests from the gradebook,
    which ``nbgrader generate_assignment`` fills. After a fresh clone the gradebook
    does not exist yet: run it once, writing its release copy to a scratch folder
    so that the committed release/ is left as it is.
    """
    import tempfile

    from nbgrader.api import Gradebook, MissingEntry

    from grader.course import nbgrader_db_url

    with Gradebook(nbgrader_db_url(course)) as gb:
        try:
            gb.find_assignment(assignment)
            return
        except MissingEntry:
            pass
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        run_nbgrader(["generate_assignment", assignment, "--force",
                      f"--CourseDirectory.release_directory={tmp}"], cwd=course)


def submitted_students(course: Path, assignment: str) -> list[str]:
    base = Path(course) / "submitted"
    return sorted(p.parent.name for p in base.glob(f"*/{assignment}") if p.is_dir())


