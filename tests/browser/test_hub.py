"""The course on a real JupyterHub: `make hub`, each role logged in as itself, in Chromium.

`make hub` (as root) sets up a demo class with real OS accounts: two students and one
instructor, each server spawned as its own user, nbgrader's exchange server-wide, the
Formgrader for the instructor only. Headless Chromium logs in as each of them and runs
the loop of a course: the instructor releases 01_grad (Formgrader); both students fetch
it; one hands in a full notebook, the other a partial one (their answers are written
into the fetched notebook as the student's own file: typing in the editor is
test_assignment_loop's part); both Validate and Submit; a try from a student's notebook
shows they cannot read the other student's work nor the instructor's course folder; the
instructor collects, runs `make autograde` as their own non-root account (sandboxed,
limits reported), reviews a submission in the Formgrader, generates and releases
feedback; each student fetches their own feedback and sees their own score.

Screenshots of every step go to artifacts/browser/hub/, with timings.txt (the whole
loop's time). The hub, its accounts and everything they run are removed at the end
(`make hub-clean`); the shared Python environment under PREFIX is kept as a cache
(HUB_KEEP_ENV=1: building it takes about two minutes).
"""
from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.browser._support import (ARTIFACTS, COURSE_ID, REPO, Shots, free_port,
                                    close_menus, launch_chromium, missing_browser,
                                    nbgrader_menu_label, open_nbgrader_menu, quiet_lab_settings,
                                    run_cell)

PREFIX = Path("/opt/jaxcourse-test")
# Names no real account is likely to have; make hub refuses ones it did not create.
STUDENTS = ("hubt-ada", "hubt-ben")
INSTRUCTOR = "hubt-grace"
GROUP = "hubt-jax-xla"
MODULE = "01_grad"
TOTAL_POINTS = 16
SHOTS = ARTIFACTS / "hub"


def _missing() -> str | None:
    """Why the hub test cannot run here, in one line; None when it can."""
    missing = missing_browser()
    if missing:
        return missing
    if os.geteuid() != 0:
        return "needs root: make hub creates OS accounts and spawns each server as its user"
    if not shutil.which("npm") and not (REPO / "hub/node_modules/.bin/configurable-http-proxy").exists():
        return ("needs npm: JupyterHub's proxy comes from npm (apt-get install npm; "
                ".ci/run does it when CI=true)")
    for tool in ("useradd", "setpriv", "git"):
        if not shutil.which(tool):
            return f"needs {tool} (Debian: passwd, util-linux, git)"
    from tests.conftest import missing_sandbox

    return missing_sandbox()


_MISSING = _missing()
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("hub"),
              pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING))]


def _make(target: str, port: int, **extra: str) -> str:
    args = ["make", target, f"HUB_PREFIX={PREFIX}", f"HUB_PORT={port}",
            f"HUB_STUDENTS={' '.join(STUDENTS)}", f"HUB_INSTRUCTORS={INSTRUCTOR}",
            f"HUB_GROUP={GROUP}", *[f"{k}={v}" for k, v in extra.items()]]
    proc = subprocess.run(args, cwd=REPO, text=True, capture_output=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"`{' '.join(args)}` failed ({proc.returncode}):\n{out[-4000:]}"
    return out


class _Running:
    """A command started by ``_as(..., wait=False)``: ``wait()`` checks it like ``_as``."""

    def __init__(self, proc: subprocess.Popen, what: str):
        self.proc, self.what = proc, what

    def wait(self, timeout: float = 600) -> str:
        out, _ = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, f"{self.what} failed ({self.proc.returncode}):\n{out[-4000:]}"
        return out


def _as(name: str, cmd: list[str], cwd: Path, timeout: float = 600, wait: bool = True):
    """``cmd`` run as the account ``name`` (its uid, its groups, its home), as a terminal
    of its JupyterLab would run it: the course environment first on PATH, the hub's
    server-wide Jupyter config (and the graders' one for the instructor)."""
    user = pwd.getpwnam(name)
    hub = json.loads((PREFIX / "hub/etc/hub.json").read_text())
    config = [hub["jupyter_config"]]
    if name == INSTRUCTOR:
        config.insert(0, hub["jupyter_config_graders"])
    env = {"HOME": user.pw_dir, "USER": name, "LOGNAME": name, "LANG": "C.UTF-8",
           "PATH": f"{hub['env']}/bin:/usr/local/bin:/usr/bin:/bin",
           "JUPYTER_CONFIG_PATH": os.pathsep.join(config)}
    proc = subprocess.Popen(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                             "--init-groups", "--", *cmd], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    running = _Running(proc, f"`{' '.join(cmd)}` as {name}")
    return running.wait(timeout) if wait else running


def _write_as(name: str, path: Path, text: str) -> None:
    user = pwd.getpwnam(name)
    path.write_text(text)
    os.chown(path, user.pw_uid, user.pw_gid)


def _chown_tree(name: str, root: Path) -> None:
    user = pwd.getpwnam(name)
    for folder, dirs, files in os.walk(root):
        os.chown(folder, user.pw_uid, user.pw_gid)
        for f in files:
            os.chown(os.path.join(folder, f), user.pw_uid, user.pw_gid)


def _answers(fetched: dict, source: dict, which: set[str] | None) -> dict:
    """The fetched notebook with the source's answer cells (all, or those in ``which``)."""
    answers = {c["metadata"]["nbgrader"]["grade_id"]: c["source"] for c in source["cells"]
               if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
    nb = json.loads(json.dumps(fetched))
    for cell in nb["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in answers and (which is None or grade_id in which):
            src = answers[grade_id]
            src = "".join(src) if isinstance(src, list) else src
            src = re.sub(r"^\s*### (BEGIN|END) SOLUTION\s*\n", "", src, flags=re.M)
            cell["source"] = src
    return nb


def _probe_notebook(paths: list[str]) -> dict:
    code = ("import os\n"
            f"for path in {paths!r}:\n"
            "    try:\n"
            "        if path.endswith('/'):\n"
            "            print('LISTED', path, os.listdir(path))\n"
            "        else:\n"
            "            print('READ', path, len(open(path, 'rb').read()), 'bytes')\n"
            "    except OSError as e:\n"
            "        print(type(e).__name__, path)\n")
    return {"cells": [{"cell_type": "code", "execution_count": None, "id": "probe", "metadata": {},
                       "outputs": [], "source": code}],
            "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                        "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


def _server_owners() -> list[str]:
    """The accounts that run a jupyterhub-singleuser process."""
    owners = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"jupyterhub-singleuser" in (proc / "cmdline").read_bytes():
                owners.append(pwd.getpwuid(proc.stat().st_uid).pw_name)
        except (OSError, KeyError):
            pass
    return owners



def _formgrader_action(page, base: str, column: str, expect_text: str) -> None:
    """Clicks a Formgrader action of the module's row and waits for its success dialog."""
    from playwright.sync_api import expect

    page.goto(f"{base}/formgrader/manage_assignments")
    row = page.locator("#main-table tr", has_text=MODULE).first
    expect(row).to_be_visible(timeout=60_000)
    row.locator(f"td.{column} a").click()
    modal = page.locator(".modal.in .modal-content")
    expect(modal).to_contain_text(expect_text, timeout=240_000)
    page.wait_for_timeout(500)  # Bootstrap's fade-in, before the screenshot


@pytest.mark.timeout(1200)
def test_course_loop_on_a_real_hub():
    from playwright.sync_api import expect, sync_playwright

    shots = Shots(SHOTS)
    t0 = time.monotonic()
    timings: dict[str, float] = {}

    def lap(step: str) -> None:
        timings[step] = round(time.monotonic() - t0, 1)

    port = free_port()
    hub_url = f"http://127.0.0.1:{port}"
    try:
        out = _make("hub", port)
        (SHOTS / "make_hub.txt").write_text(out)
        assert f"Remove all of it: make hub-clean HUB_PREFIX={PREFIX}" in out, out[-3000:]
        lap("make hub")
        passwords = dict(line.split() for line in
                         (PREFIX / "hub/state/passwords.txt").read_text().splitlines())
        hub = json.loads((PREFIX / "hub/etc/hub.json").read_text())
        exchange = Path(hub["jupyter_config"]).parent.parent / "srv" / "exchange"
        homes = {n: Path(pwd.getpwnam(n).pw_dir) for n in (*STUDENTS, INSTRUCTOR)}
        course = homes[INSTRUCTOR] / "jax-xla"
        for name, home in homes.items():  # no 'Jupyter news?' pop-up over the screenshots
            quiet_lab_settings(home / ".jupyter")
            _chown_tree(name, home / ".jupyter")

        # The instructor builds the release (`make release`, their course folder, as
        # themselves): the module and its cells enter their gradebook.
        # It runs while everyone logs in.
        release = _as(INSTRUCTOR, ["make", "release", f"ASSIGNMENTS={MODULE}"], course, wait=False)

        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            pages = {}
            try:
                # --- Everyone logs in with their OS password; the servers spawn together.
                for name in (INSTRUCTOR, *STUDENTS):
                    context = browser.new_context(viewport={"width": 1400, "height": 900})
                    context.set_default_timeout(60_000)
                    page = pages[name] = context.new_page()
                    page.goto(f"{hub_url}/hub/login")
                    page.fill("#username_input", name)
                    page.fill("#password_input", passwords[name])
                    if name == INSTRUCTOR:
                        shots(page, "login_page")
                    page.click("#login_submit")
                for name, page in pages.items():
                    nbgrader_menu_label(page).wait_for(timeout=240_000)
                    assert page.url.startswith(f"{hub_url}/user/{name}/lab"), page.url
                lap("logged in, servers up")
                # Each server runs as its own account.
                owners = _server_owners()
                assert sorted(owners) == sorted(pages), owners
                # The Formgrader is the instructor's only.
                for name, page in pages.items():
                    open_nbgrader_menu(page)
                    formgrader = page.locator('#jp-mainmenu-nbgrader li[data-command="nbgrader:open-formgrader"]')
                    assignments = page.locator('#jp-mainmenu-nbgrader li[data-command="nbgrader:open-assignment-list"]')
                    expect(assignments).to_be_visible()
                    if name == INSTRUCTOR:
                        expect(formgrader).to_be_visible()
                    else:  # neither in the menu nor on the server
                        expect(formgrader).to_be_hidden()
                    shots(page, f"{name}_nbgrader_menu")
                    close_menus(page)
                    status = page.request.get(f"{hub_url}/user/{name}/formgrader/").status
                    assert status == (200 if name == INSTRUCTOR else 404), (name, status)

                # --- The instructor releases the module from the Formgrader.
                release.wait()
                lap("make release (instructor)")
                grace = pages[INSTRUCTOR]
                gbase = f"{hub_url}/user/{INSTRUCTOR}"
                _formgrader_action(grace, gbase, "release", "Successfully released")
                shots(grace, "formgrader_released")
                assert (exchange / COURSE_ID / "outbound" / MODULE / f"{MODULE}.ipynb").exists()
                lap("released")

                # --- Both students fetch it from the Assignment List, into their homes.
                for name in STUDENTS:
                    page = pages[name]
                    open_nbgrader_menu(page, "nbgrader:open-assignment-list")
                    released = page.locator("#released_assignments_list > .list_item")
                    expect(released).to_have_count(1, timeout=60_000)
                    expect(released.first.locator(".item_course")).to_have_text(COURSE_ID)
                    shots(page, f"{name}_assignment_list")
                    released.first.locator(".item_status button", has_text="Fetch").click()
                    expect(page.locator("#fetched_assignments_list > .list_item")).to_have_count(1, timeout=60_000)
                    shots(page, f"{name}_fetched")
                    nb_path = homes[name] / MODULE / f"{MODULE}.ipynb"
                    assert nb_path.exists() and nb_path.stat().st_uid == pwd.getpwnam(name).pw_uid
                lap("fetched")

                # --- Their answers: ada all of them, ben only the first exercise.
                source = json.loads((course / "source" / MODULE / f"{MODULE}.ipynb").read_text())
                fetched = json.loads((homes[STUDENTS[0]] / MODULE / f"{MODULE}.ipynb").read_text())
                first = next(c["metadata"]["nbgrader"]["grade_id"] for c in source["cells"]
                             if c.get("metadata", {}).get("nbgrader", {}).get("solution"))
                for name, which in ((STUDENTS[0], None), (STUDENTS[1], {first})):
                    _write_as(name, homes[name] / MODULE / f"{MODULE}.ipynb",
                              json.dumps(_answers(fetched, source, which), indent=1))

                # --- Both Validate (the notebook's button) and Submit (the Assignment List).
                for name, passes in ((STUDENTS[0], True), (STUDENTS[1], False)):
                    page = pages[name]
                    page.goto(f"{hub_url}/user/{name}/lab/tree/{MODULE}/{MODULE}.ipynb")
                    button = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) jp-button.validate-button")
                    expect(button).to_be_visible(timeout=120_000)
                    button.click()
                    dialog = page.locator(".nbgrader-ErrorDialog, .nbgrader-SuccessDialog")
                    expect(dialog).to_have_count(1, timeout=300_000)
                    message = dialog.locator("#validation-message")
                    if passes:
                        expect(message).to_contain_text("Success! Your notebook passes all the tests.")
                    else:
                        expect(message).to_have_class(re.compile("validation-failed"))
                        expect(message).to_contain_text("not implemented yet")
                    shots(page, f"{name}_validated")
                    dialog.locator("button.jp-Dialog-button").click()
                    open_nbgrader_menu(page, "nbgrader:open-assignment-list")
                    page.locator("#fetched_assignments_list > .list_item").first.locator(
                        ".item_status button", has_text="Submit").click()
                    expect(page.locator("#submitted_assignments_list > .list_item")).to_have_count(1, timeout=60_000)
                    shots(page, f"{name}_submitted")
                lap("validated and submitted")

                # --- A student cannot read the other's files nor the instructor's course.
                ben = STUDENTS[1]
                targets = [str(homes[STUDENTS[0]] / MODULE / f"{MODULE}.ipynb"),
                           str(homes[STUDENTS[0]]) + "/", str(course / "source" / MODULE / f"{MODULE}.ipynb"),
                           str(course / "gradebook.db"), str(exchange / COURSE_ID / "inbound") + "/"]
                _write_as(ben, homes[ben] / "probe.ipynb", json.dumps(_probe_notebook(targets)))
                page = pages[ben]
                # `?reset`: a fresh workspace, so 01_grad's tab is not restored beside the
                # probe (while it restored, its panel was found first without its hidden
                # class, and a CI run timed out clicking a cell it could not see; another
                # had a dialog over the probe's cell).
                page.goto(f"{hub_url}/user/{ben}/lab/tree/probe.ipynb?reset")
                cell = page.locator(".jp-NotebookPanel .jp-CodeCell:visible",
                                    has_text="LISTED").first
                expect(page.locator("#jp-main-statusbar")).to_contain_text("| Idle", timeout=120_000)
                run_cell(page, cell, "probe")
                output = cell.locator(".jp-OutputArea-output")
                expect(output).to_contain_text(targets[-1], timeout=120_000)
                for target in targets:
                    expect(output).to_contain_text(f"PermissionError {target}")
                expect(output).not_to_contain_text("READ ")
                expect(output).not_to_contain_text("LISTED ")
                shots(page, f"{ben}_cannot_read_others")
                lap("isolation shown")

                # --- The instructor collects (Formgrader) and grades as themselves.
                _formgrader_action(grace, gbase, "collect", "Successfully collected")
                shots(grace, "formgrader_collected")
                for name in STUDENTS:
                    assert (course / "submitted" / name / MODULE / f"{MODULE}.ipynb").exists()
                graded = _as(INSTRUCTOR, ["make", "autograde"], course)
                (SHOTS / "make_autograde.txt").write_text(graded)
                assert re.search(rf"{STUDENTS[0]}\s.*{TOTAL_POINTS} / {TOTAL_POINTS}\s", graded), graded[-3000:]
                assert re.search(rf"{STUDENTS[1]}\s.*1 / {TOTAL_POINTS}\s", graded), graded[-3000:]
                level = re.search(r"\b(bubblewrap\+[a-z0-9-]+)", graded)
                assert level, f"no sandbox level in the summary:\n{graded[-3000:]}"
                assert "peak MiB" in graded and "watchdog holds the limits" in graded or "cgroup" in level.group(1)
                lap(f"make autograde as {INSTRUCTOR} ({level.group(1)})")

                # --- Reviews the scores and one submission in the Formgrader.
                grace.goto(f"{gbase}/formgrader/manage_submissions/{MODULE}")
                for name, score in ((STUDENTS[0], TOTAL_POINTS), (STUDENTS[1], 1)):
                    row = grace.locator("#main-table tr", has_text=name).first
                    expect(row.locator(".score")).to_have_text(f"{score} / {TOTAL_POINTS}", timeout=60_000)
                shots(grace, "formgrader_scores")
                grace.goto(f"{gbase}/formgrader/gradebook/{MODULE}/{MODULE}")
                row = grace.locator("#main-table tr", has_text=STUDENTS[1]).first
                expect(row).to_be_visible(timeout=60_000)
                row.locator("a").first.click()
                expect(grace.locator("body")).to_contain_text("not implemented yet", timeout=60_000)
                shots(grace, "formgrader_submission_review")

                # --- Generates and releases feedback.
                _formgrader_action(grace, gbase, "generate-feedback", "Successfully generated feedback")
                shots(grace, "formgrader_feedback_generated")
                _formgrader_action(grace, gbase, "release-feedback", "Successfully released feedback")
                shots(grace, "formgrader_feedback_released")
                lap("reviewed, feedback released")

                # --- Each student fetches their own feedback and sees their own score.
                for name, score in ((STUDENTS[0], TOTAL_POINTS), (STUDENTS[1], 1)):
                    page = pages[name]
                    page.goto(f"{hub_url}/user/{name}/lab")
                    open_nbgrader_menu(page, "nbgrader:open-assignment-list")
                    submitted = page.locator("#submitted_assignments_list > .list_item").first
                    submitted.locator("button", has_text="Fetch Feedback").click()
                    expect(submitted).to_contain_text("view feedback", timeout=60_000)
                    shots(page, f"{name}_feedback_fetched")
                    found = list((homes[name] / MODULE / "feedback").glob(f"*/{MODULE}.html"))
                    assert len(found) == 1, found
                    rel = found[0].relative_to(homes[name])
                    page.goto(f"{hub_url}/user/{name}/files/{rel}")
                    expect(page.locator("body")).to_contain_text(f"{score}.0 / {TOTAL_POINTS}.0")
                    shots(page, f"{name}_feedback_score")
                lap("feedback fetched")
            except BaseException:
                for name, page in pages.items():
                    try:  # what each browser showed when the step failed
                        page.screenshot(path=str(SHOTS / f"FAILED_{name}.png"))
                    except Exception:  # noqa: BLE001 - the failure itself is what matters
                        pass
                raise
            finally:
                browser.close()
    finally:
        log = PREFIX / "hub/state/jupyterhub.log"
        if log.exists():
            shutil.copy(log, SHOTS / "jupyterhub.log")
        if (PREFIX / "hub/manifest.json").exists():
            (SHOTS / "make_hub_clean.txt").write_text(_make("hub-clean", port, HUB_KEEP_ENV="1"))
        timings["make hub-clean"] = round(time.monotonic() - t0, 1)
        (SHOTS / "timings.txt").write_text("\n".join(f"{k}: {v} s" for k, v in timings.items()) + "\n")
    # Nothing left: no hub, no account, no process of theirs.
    for name in (*STUDENTS, INSTRUCTOR):
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{hub_url}/hub/api/", timeout=5)
    assert not (PREFIX / "hub").exists()
