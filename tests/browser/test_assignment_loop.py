"""The course in a real browser: the whole nbgrader assignment loop of a shared server.

Headless Chromium (Debian's, driven by Playwright) plays the student and the instructor
of one module, 01_grad, on this machine. Everything runs in temporary folders:

- ``exchange/``   nbgrader's exchange (``Exchange.root``), shared by everyone;
- ``etc-jupyter/`` the server-wide nbgrader_config.py (exchange and course id), as
  ``/etc/jupyter/nbgrader_config.py`` would be on a course server;
- ``course/``     the instructor's course folder (a scratch copy of the repo's config and
  source/01_grad): release/, submitted/, autograded/, feedback/, gradebook.db land here;
- ``student/``    the student's home: JupyterLab serves it and fetches into it. Student
  and instructor are the same OS user here, so the student's own jupyter config pins
  their student id (``CourseDirectory.student_id``); on a course server it is the login.

Screenshots of every step go to artifacts/browser/ (not committed).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.course import make_scratch_course, nbgrader_env
from tests.browser._support import (ARTIFACTS, COURSE_ID, REPO, ConsoleLog, LabServer, Shots,
                                    kill_leftover_kernels, launch_chromium, missing_browser,
                                    close_menus, nbgrader_extension_problems,
                                    nbgrader_menu_label, open_nbgrader_menu,
                                    quiet_lab_settings, run_cell, write_nbgrader_config)

_MISSING = missing_browser()
if _MISSING and os.environ.get("CI") == "true":
    raise RuntimeError(f"browser tests cannot run in CI: {_MISSING}")

pytestmark = [pytest.mark.browser, pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING))]

MODULE = "01_grad"
STUDENT = "ada"
SOLUTION = '''def scatter_add(x, idx, vals):
    """Adds vals at positions idx of x, accumulating repeated indices."""
    return x.at[idx].add(vals)
'''
# Cell indices in the 01_grad notebook (release and source have the same cells).
SOLUTION_CELL, TRY_CELL, TEST_CELL = 7, 8, 9
PLOT_CELL = 15
GRADED_TESTS, TOTAL_POINTS = 9, 16
ERROR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{out[-3000:]}"
    return out


@pytest.fixture
def shared_server(tmp_path):
    """The folders and environments of a course server, in tmp_path."""
    root = tmp_path
    exchange = root / "exchange"
    exchange.mkdir()
    os.chmod(exchange, 0o777)  # nbgrader wants a world-writable exchange
    etc = root / "etc-jupyter"
    write_nbgrader_config(etc, Exchange__root=str(exchange), CourseDirectory__course_id=COURSE_ID)
    student_home = root / "student"
    student_cfg = student_home / ".jupyter"
    write_nbgrader_config(student_cfg, CourseDirectory__student_id=STUDENT,
                          Exchange__cache=str(student_home / ".nbgrader_cache"))
    quiet_lab_settings(student_cfg)
    instructor_cfg = root / "instructor-jupyter"
    instructor_cfg.mkdir()
    quiet_lab_settings(instructor_cfg)
    course = make_scratch_course(root / "course", [MODULE])

    base = nbgrader_env()
    base["JUPYTER_CONFIG_PATH"] = str(etc)
    student_env = dict(base, JUPYTER_CONFIG_DIR=str(student_cfg),
                       JUPYTER_RUNTIME_DIR=str(root / "runtime-student"))
    instructor_env = dict(base, JUPYTER_CONFIG_DIR=str(instructor_cfg),
                          JUPYTER_RUNTIME_DIR=str(root / "runtime-instructor"))
    return dict(root=root, exchange=exchange, course=course, student_home=student_home,
                student_env=student_env, instructor_env=instructor_env)


def _student_lab(s) -> LabServer:
    """`make lab` in the repo, serving the student's home, on a free port with a token."""
    lab = LabServer(cmd=[], cwd=REPO, env=s["student_env"], log_path=ARTIFACTS / "student_lab.log")
    lab.cmd = ["make", "lab", f"LAB_PORT={lab.port}", f"LAB_DIR={s['student_home']}", "LAB_OPEN=",
               f"LAB_ARGS=--no-browser --ip=127.0.0.1 --IdentityProvider.token={lab.token}"]
    return lab


def _instructor_lab(s) -> LabServer:
    """The instructor's JupyterLab in the course folder (the Formgrader reads its config there)."""
    lab = LabServer(cmd=[], cwd=s["course"], env=s["instructor_env"],
                    log_path=ARTIFACTS / "instructor_lab.log")
    lab.cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
               f"--port={lab.port}", f"--IdentityProvider.token={lab.token}",
               f"--ServerApp.root_dir={s['course']}"]
    if os.getuid() == 0:
        lab.cmd.append("--allow-root")
    return lab


def _open_lab(page, lab: LabServer):
    page.goto(f"{lab.url}/lab?token={lab.token}")
    nbgrader_menu_label(page).wait_for(timeout=120_000)



def _cells(page):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")


def _wait_saved(page) -> None:
    page.keyboard.press("Control+s")
    page.wait_for_function(
        "() => !document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)')"
        "?.classList.contains('jp-mod-dirty') && !document.querySelector('.lm-TabBar-tab.jp-mod-dirty')",
        timeout=30_000)


@pytest.mark.timeout(900)
def test_assignment_loop_in_the_browser(shared_server):
    from playwright.sync_api import expect, sync_playwright

    s = shared_server
    shots = Shots(ARTIFACTS)
    course, ienv = s["course"], s["instructor_env"]
    t0 = time.monotonic()
    timings: dict[str, float] = {}

    def lap(step: str) -> None:
        timings[step] = round(time.monotonic() - t0, 1)

    # The instructor releases the module: `make release` (the command it runs, in the
    # course folder), then nbgrader release_assignment into the exchange.
    student_lab, instructor_lab = _student_lab(s).start(), _instructor_lab(s).start()
    try:
        _run([sys.executable, "-m", "autograder", "release", MODULE], course, ienv)
        _run([sys.executable, "-m", "nbgrader", "db", "student", "add", STUDENT,
              "--first-name", "Ada", "--last-name", "Lovelace"], course, ienv)
        _run([sys.executable, "-m", "nbgrader", "release_assignment", MODULE], course, ienv)
        assert (s["exchange"] / COURSE_ID / "outbound" / MODULE / f"{MODULE}.ipynb").exists()
        lap("released")

        student_lab.wait_ready()
        lap("student lab up")
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                context.set_default_timeout(60_000)
                page = context.new_page()
                console = ConsoleLog(page)

                # --- The student's JupyterLab, with nbgrader's extensions loaded.
                _open_lab(page, student_lab)
                problems = nbgrader_extension_problems(page, console)
                assert not problems, "nbgrader's JupyterLab extension is broken:\n" + "\n".join(problems)
                open_nbgrader_menu(page)
                expect(page.locator('#jp-mainmenu-nbgrader li[data-command="nbgrader:open-assignment-list"]')).to_be_visible()
                shots(page, "lab_started_nbgrader_menu")
                close_menus(page)

                # --- Assignment List: fetch the released module.
                open_nbgrader_menu(page, "nbgrader:open-assignment-list")
                released = page.locator("#released_assignments_list > .list_item")
                expect(released).to_have_count(1, timeout=60_000)
                expect(released.first.locator(".item_name")).to_have_text(MODULE)
                expect(released.first.locator(".item_course")).to_have_text(COURSE_ID)
                shots(page, "assignment_list_released")
                released.first.locator(".item_status button", has_text="Fetch").click()
                fetched = page.locator("#fetched_assignments_list > .list_item")
                expect(fetched).to_have_count(1, timeout=60_000)
                assert (s["student_home"] / MODULE / f"{MODULE}.ipynb").exists()
                fetched.first.locator("a", has_text=MODULE).first.click()
                notebook_link = page.locator("#fetched_assignments_list .collapse.in a", has_text=f"{MODULE}")
                expect(notebook_link.first).to_be_visible()
                shots(page, "assignment_fetched")
                lap("fetched")

                # --- Open the notebook and run every cell, as a student reads the chapter.
                notebook_link.first.click()
                cells = _cells(page)
                n = len(json.loads((s["student_home"] / MODULE / f"{MODULE}.ipynb").read_text())["cells"])
                expect(cells).to_have_count(n, timeout=60_000)
                expect(page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) jp-button.validate-button")).to_be_visible()
                shots(page, "notebook_opened")
                expect(page.locator("#jp-main-statusbar")).to_contain_text("| Idle", timeout=120_000)
                for i in range(n):
                    cell = cells.nth(i)
                    if "jp-CodeCell" in (cell.get_attribute("class") or ""):
                        run_cell(page, cell, f"#{i}")
                lap("ran all cells")

                plot = cells.nth(PLOT_CELL).locator(".jp-OutputArea-output img")
                expect(plot).to_be_visible()
                box = plot.bounding_box()
                assert box and box["width"] > 200 and box["height"] > 150, box
                plot.scroll_into_view_if_needed()
                shots(page, "plot_rendered")

                # Every visible test of an unsolved exercise fails with a teaching message.
                test_cell = cells.nth(TEST_CELL)
                test_cell.scroll_into_view_if_needed()
                error = test_cell.locator(ERROR_OUTPUT)
                expect(error).to_contain_text("scatter_add is not implemented yet")
                expect(error).to_contain_text("1.2 Arrays are immutable")
                failing = page.locator(f".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell {ERROR_OUTPUT}",
                                       has_text="not implemented yet")
                assert failing.count() >= GRADED_TESTS, f"{failing.count()} cells failed as unsolved"
                shots(page, "unsolved_test_fails")

                # --- Solve exercise 1, rerun, and see its test pass.
                editor = cells.nth(SOLUTION_CELL).locator(".cm-content")
                editor.click()
                page.keyboard.press("Control+a")
                page.keyboard.insert_text(SOLUTION)
                page.keyboard.press("Escape")  # leave the editor
                for i in (SOLUTION_CELL, TRY_CELL, TEST_CELL):
                    run_cell(page, cells.nth(i), f"#{i}")
                expect(cells.nth(TRY_CELL).locator(".jp-OutputArea-output")).to_contain_text("Array([0., 6., 0., 2.], dtype=float32)")
                expect(test_cell.locator(ERROR_OUTPUT)).to_have_count(0)
                test_cell.scroll_into_view_if_needed()
                shots(page, "solved_test_passes")
                _wait_saved(page)
                lap("solved")

                # --- Validate: the other exercises still fail, and the dialog says so.
                page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) jp-button.validate-button").click()
                dialog = page.locator(".nbgrader-ErrorDialog, .nbgrader-SuccessDialog")
                expect(dialog).to_have_count(1, timeout=240_000)
                message = dialog.locator("#validation-message")
                expect(message).to_have_class(re.compile("validation-failed"))
                failed = message.get_by_text("The following cell failed:")
                assert failed.count() == GRADED_TESTS - 1, f"{failed.count()} cells failed validation"
                expect(message).to_contain_text("not implemented yet")
                expect(message).not_to_contain_text("scatter_add is not implemented")
                message.get_by_text("not implemented yet").first.scroll_into_view_if_needed()
                shots(page, "validate_result")
                dialog.locator("button.jp-Dialog-button").click()
                lap("validated")

                # --- Submit from the Assignment List.
                page.locator(".lm-TabBar-tab", has_text="Assignments").click()
                fetched.first.locator(".item_status button", has_text="Submit").click()
                submitted = page.locator("#submitted_assignments_list > .list_item")
                expect(submitted).to_have_count(1, timeout=60_000)
                expect(submitted.first).to_contain_text(MODULE)
                shots(page, "submitted")
                inbound = list((s["exchange"] / COURSE_ID / "inbound").glob(f"{STUDENT}+{MODULE}+*"))
                assert len(inbound) == 1, inbound
                lap("submitted")

                # --- The instructor collects, autogrades (what `make autograde` runs) and
                # generates feedback (what `make feedback` runs), in the course folder.
                _run([sys.executable, "-m", "nbgrader", "collect", MODULE], course, ienv)
                assert (course / "submitted" / STUDENT / MODULE / f"{MODULE}.ipynb").exists()
                out = _run([sys.executable, "-m", "autograder", "grade", MODULE], course, ienv, timeout=600)
                assert re.search(rf"{STUDENT}\s.*1 / {TOTAL_POINTS}\s.*graded", out), out[-2000:]
                _run([sys.executable, "-m", "nbgrader", "generate_feedback", MODULE, "--force"], course, ienv)
                feedback = course / "feedback" / STUDENT / MODULE / f"{MODULE}.html"
                assert feedback.exists()
                lap("graded")

                # --- The Formgrader: the assignment, the graded submission and its score.
                instructor_lab.wait_ready()
                ipage = context.new_page()
                iconsole = ConsoleLog(ipage)
                _open_lab(ipage, instructor_lab)
                open_nbgrader_menu(ipage, "nbgrader:open-formgrader")
                frame = ipage.frame_locator("iframe").first
                row = frame.locator("#main-table tr", has_text=MODULE)
                expect(row.first).to_be_visible(timeout=60_000)
                expect(row.first.locator(".status")).to_have_text("released")
                expect(row.first.locator(".num-submissions")).to_have_text("1")
                shots(ipage, "formgrader_assignments")
                ipage.goto(f"{instructor_lab.url}/formgrader/manage_submissions/{MODULE}?token={instructor_lab.token}")
                student_row = ipage.locator("#main-table tr", has_text=STUDENT)
                expect(student_row.first).to_be_visible(timeout=60_000)
                expect(student_row.first.locator(".score")).to_have_text(f"1 / {TOTAL_POINTS}")
                shots(ipage, "formgrader_submission_scores")
                ipage.goto(f"{instructor_lab.url}/formgrader/gradebook/{MODULE}/{MODULE}?token={instructor_lab.token}")
                expect(ipage.locator("#main-table tr", has_text=STUDENT).first).to_be_visible(timeout=60_000)
                shots(ipage, "formgrader_gradebook")
                assert not [e for e in iconsole.errors() if "nbgrader" in e.lower()], iconsole.errors()

                # --- The feedback page the student gets back.
                ipage.goto(feedback.as_uri())
                expect(ipage.locator("body")).to_contain_text(f"1.0 / {TOTAL_POINTS}.0")
                expect(ipage.locator("body")).to_contain_text("not implemented yet")
                expect(ipage.locator("body")).not_to_contain_text("BEGIN HIDDEN TESTS")
                shots(ipage, "feedback_page", full_page=False)
                lap("formgrader and feedback")
            except BaseException:
                for k, open_page in enumerate(browser.contexts[0].pages if browser.contexts else []):
                    try:  # what the browser showed when the step failed
                        open_page.screenshot(path=str(ARTIFACTS / f"FAILED_page{k}.png"))
                    except Exception:  # noqa: BLE001 - the failure itself is what matters
                        pass
                raise
            finally:
                browser.close()
    finally:
        student_lab.stop()
        instructor_lab.stop()
        for side in ("student", "instructor"):
            kill_leftover_kernels(s["root"] / f"runtime-{side}")
        (ARTIFACTS / "timings.txt").write_text("\n".join(f"{k}: {v} s" for k, v in timings.items()) + "\n")


@pytest.mark.timeout(300)
def test_extension_check_reports_a_plugin_that_does_not_load(tmp_path):
    """The check above can fail: with nbgrader's Assignment List plugin disabled (as a
    version mismatch leaves it: installed, not running), it reports the plugin."""
    from playwright.sync_api import sync_playwright

    etc = tmp_path / "etc-jupyter"
    (etc / "labconfig").mkdir(parents=True)
    (etc / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyter/nbgrader:assignment-list": True}}))
    cfg = tmp_path / "jupyter"
    quiet_lab_settings(cfg)
    env = dict(nbgrader_env(), JUPYTER_CONFIG_PATH=str(etc), JUPYTER_CONFIG_DIR=str(cfg),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    lab = LabServer(cmd=[], cwd=tmp_path, env=env, log_path=ARTIFACTS / "broken_lab.log")
    lab.cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
               f"--port={lab.port}", f"--IdentityProvider.token={lab.token}"]
    if os.getuid() == 0:
        lab.cmd.append("--allow-root")
    lab.start()
    try:
        lab.wait_ready()
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                console = ConsoleLog(page)
                _open_lab(page, lab)
                problems = nbgrader_extension_problems(page, console, wait_s=15)
            finally:
                browser.close()
    finally:
        lab.stop()
        kill_leftover_kernels(tmp_path / "runtime")
    text = "\n".join(problems)
    assert "@jupyter/nbgrader:assignment-list did not activate" in text, problems
    assert "@jupyter/nbgrader:validate-assignment" not in text, problems
