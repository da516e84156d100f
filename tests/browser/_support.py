"""JupyterLab servers, headless Chromium and the nbgrader-extension check for the browser tests.

Playwright (from PyPI) drives Debian's Chromium (``/usr/bin/chromium``); nothing is
downloaded. Playwright is imported lazily, so this module imports without it.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Found on PATH (Debian puts it in /usr/bin), so a PATH without it runs as a machine
# without it does: the tests skip.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = REPO / "artifacts" / "browser"
COURSE_ID = "jax-xla"
# Flags for a closed network, as root, with a fresh profile (see the machine notes).
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# The nbgrader front-end plugins a student needs, and the line each logs once active.
REQUIRED_PLUGINS = {
    "@jupyter/nbgrader:assignment-list": "JupyterLab extension assignment-list is activated!",
    "@jupyter/nbgrader:validate-assignment": "JupyterLab extension validate-assignment is activated!",
}


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, in one line; None when they can."""
    if not shutil.which("chromium"):
        return ("needs chromium: no chromium on PATH (apt-get install chromium; "
                ".ci/run does it when CI=true)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -r requirements.txt)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_nbgrader_config(folder: Path, **settings: object) -> Path:
    """Writes ``folder/nbgrader_config.py`` setting ``Section.trait`` (given as Section__trait)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["c = get_config()  # noqa: F821"]
    for key, value in settings.items():
        section, trait = key.split("__")
        lines.append(f"c.{section}.{trait} = {value!r}")
    path = folder / "nbgrader_config.py"
    path.write_text("\n".join(lines) + "\n")
    return path


def quiet_lab_settings(config_dir: Path) -> None:
    """User settings in a temp config dir: no 'Jupyter news?' pop-up over the screenshots,
    and every notebook cell in the page (no windowing), so cell N is the Nth cell."""
    settings = config_dir / "lab" / "user-settings" / "@jupyterlab"
    for plugin, values in {"apputils-extension/notification": {"fetchNews": "false"},
                           "notebook-extension/tracker": {"windowingMode": "none"}}.items():
        path = settings / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@dataclass
class LabServer:
    """A JupyterLab server in its own process group, logging to a file."""

    cmd: list[str]
    cwd: Path
    env: dict[str, str]
    log_path: Path
    port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: os.urandom(12).hex())
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "LabServer":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd, cwd=self.cwd, env=self.env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def wait_ready(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=5):
                    return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text()[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            # SIGTERM: the server shuts its kernels down before it exits.
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=20)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._log.close()


class Shots:
    """Numbered screenshots, named by step."""

    def __init__(self, folder: Path):
        self.folder = folder
        if folder.exists():
            for old in folder.glob("*.png"):
                old.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        self.n = 0

    def __call__(self, page, name: str, **kwargs) -> Path:
        self.n += 1
        path = self.folder / f"{self.n:02d}_{name}.png"
        page.screenshot(path=str(path), **kwargs)
        return path


def kill_leftover_kernels(runtime_dir: Path) -> None:
    """Kills kernels whose connection file lies in this test's runtime folder (ours only)."""
    marker = str(runtime_dir).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


class ConsoleLog:
    """Every console message and uncaught page error of a page, as (type, text)."""

    def __init__(self, page):
        self.messages: list[tuple[str, str]] = []
        page.on("console", lambda m: self.messages.append((m.type, m.text)))
        page.on("pageerror", lambda e: self.messages.append(("pageerror", str(e))))

    def texts(self) -> list[str]:
        return [text for _, text in self.messages]

    def errors(self) -> list[str]:
        return [text for kind, text in self.messages if kind in ("error", "pageerror")]


def nbgrader_extension_problems(page, console: ConsoleLog, *, wait_s: float = 30) -> list[str]:
    """What is wrong with nbgrader's JupyterLab extension on a loaded Lab page ([] when nothing).

    Checks the page config (the extension is installed, its plugins are not disabled),
    the Nbgrader menu, that each plugin a student needs logged its activation, and that
    the console shows no error mentioning nbgrader (a version mismatch with JupyterLab
    shows up there, as a plugin that fails to load or activate).
    """
    problems: list[str] = []
    config = page.evaluate(
        "() => JSON.parse(document.getElementById('jupyter-config-data').textContent)")
    names = [e.get("name") for e in config.get("federated_extensions", [])]
    if "@jupyter/nbgrader" not in names:
        problems.append(f"@jupyter/nbgrader is not in the page config's extensions: {names}")
    disabled = config.get("disabledExtensions", [])
    if isinstance(disabled, dict):
        disabled = [k for k, v in disabled.items() if v]
    for plugin in REQUIRED_PLUGINS:
        if any(d == plugin or d == plugin.split(":")[0] for d in disabled):
            problems.append(f"{plugin} is disabled in the page config")
    # Plugins activate after the page loads: wait (bounded) for each activation line.
    deadline = time.monotonic() + wait_s
    while True:
        missing = [p for p, line in REQUIRED_PLUGINS.items() if line not in console.texts()]
        if not missing or time.monotonic() > deadline:
            break
        page.wait_for_timeout(250)
    problems += [f"{p} did not activate (no {REQUIRED_PLUGINS[p]!r} in the console)" for p in missing]
    if nbgrader_menu_label(page).count() == 0:
        problems.append("the Nbgrader menu is missing from the menu bar")
    problems += [f"console error: {e[:300]}" for e in console.errors() if "nbgrader" in e.lower()]
    return problems


def nbgrader_menu_label(page):
    """The Nbgrader entry of JupyterLab's menu bar (there once nbgrader's extension loaded)."""
    return page.locator("#jp-menu-panel .lm-MenuBar-itemLabel", has_text="Nbgrader")


def open_nbgrader_menu(page, command: str | None = None, *, tries: int = 4) -> None:
    """Opens JupyterLab's Nbgrader menu (and clicks `command` in it, if given).

    Clicking the menu bar's label toggles the menu, so a menu left open (an Escape that
    went to another window of the same browser) would be closed by a blind click: the
    label is clicked only while the item is not showing, and again if the menu did not
    open within 10 s (the menu bar ignores clicks while JupyterLab is still busy).
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    label = nbgrader_menu_label(page)
    target = f'[data-command="{command}"]' if command else ""
    item = page.locator(f"#jp-mainmenu-nbgrader li{target}").first
    for attempt in range(tries):
        if not item.is_visible():
            label.click()
        try:
            item.wait_for(state="visible", timeout=10_000)
            break
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
    if command:
        item.click()


def close_menus(page) -> None:
    """Closes any open menu of JupyterLab's menu bar (Escape, until none shows)."""
    for _ in range(3):
        if not page.locator(".lm-Menu").first.is_visible():
            return
        page.keyboard.press("Escape")
        page.wait_for_timeout(200)


def dismiss_dialogs(page) -> list[str]:
    """Closes any JupyterLab dialog that is showing (its cancel button, else Escape) and
    returns what each said, so that a test that then fails can say what was in the way."""
    seen = []
    dialog = page.locator(".jp-Dialog").first
    for _ in range(5):
        if not dialog.is_visible():
            break
        seen.append(" ".join(dialog.inner_text().split())[:300])
        reject = dialog.locator(".jp-Dialog-button.jp-mod-reject")
        if reject.count():
            reject.first.click()
        else:
            page.keyboard.press("Escape")
        page.wait_for_timeout(300)
    return seen


def run_cell(page, cell, label: str, timeout_s: float = 120) -> None:
    """Runs one code cell the way a student does (select it, Ctrl+Enter) and waits for it.

    A key press that does not start the cell (the prompt stays as it was) is repeated. A
    dialog over the notebook is closed first and named if the cell then fails to run.
    """
    prompt = cell.locator(".jp-InputArea-prompt")
    # A notebook still opening shows a spinner over its cells, which takes the click (the
    # hub test failed so in CI: 60 s of "<div class=jp-Spinner> intercepts pointer events").
    page.wait_for_function(
        "() => ![...document.querySelectorAll('.jp-Spinner')].some(e => e.offsetParent !== null)",
        timeout=timeout_s * 1000)
    before = prompt.inner_text().strip()
    deadline = time.monotonic() + timeout_s
    text = before
    dialogs: list[str] = []
    for _ in range(3):
        # A dialog took the click in CI once (60 s of "<dialog class=jp-Dialog> intercepts
        # pointer events" while opening the hub test's probe notebook).
        dialogs += dismiss_dialogs(page)
        prompt.click(timeout=min(60_000, max(1_000, (deadline - time.monotonic()) * 1000)))
        page.keyboard.press("Control+Enter")
        pressed = time.monotonic()
        while time.monotonic() < deadline:
            text = prompt.inner_text().strip()
            if re.fullmatch(r"\[\d+\]:", text) and text != before:
                return
            if text == before and time.monotonic() - pressed > 10:
                break  # the cell never started: press again
            page.wait_for_timeout(100)
        else:
            break
    shown = f"; dialogs closed first: {dialogs}" if dialogs else ""
    raise AssertionError(f"cell {label} did not run within {timeout_s:.0f} s (prompt {text!r}){shown}")
