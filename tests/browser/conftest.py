"""Fixtures for the browser tests: a throwaway JupyterLab server and Debian's Chromium driven by Playwright.

The server runs on loopback with a random token, with its own settings, workspaces, config, data, runtime and IPython
directories under pytest's temporary directory. Like ``./kit lab`` it serves the kit's root (here a *copy* of
``notebooks/``, ``exercises/``, ``solutions/`` and ``results/``, so running cells never touches the repo's saved
outputs) and takes its setting defaults from the kit's ``.jupyter/lab-settings/overrides.json`` (no news
prompt). ``JUPYTER_DATA_DIR`` only adds a user directory in front of the search path, so the lab
extensions installed in the environment (``<sys.prefix>/share/jupyter/labextensions``, where ipywidgets'
``@jupyter-widgets/jupyterlab-manager`` lives) are still found.

Every process started here is ended here, by its id (``tests/processes.py``), and an interrupted run ends them too
(Ctrl-C, or SIGTERM, which the root ``conftest.py`` turns into Ctrl-C so that this teardown runs; a last resort at
interpreter exit ends whatever is still open):

* each notebook's kernel is shut down when the test that opened it is done (JupyterLab's REST API:
  ``DELETE /api/sessions/{id}``, then ``DELETE /api/kernels/{id}`` for any kernel without a session), and the test
  errors if a kernel or a kernel process is still there afterwards: at most one kernel runs at a time (measured
  before: an interrupted run left the server and 19 kernels alive, 5.1 GB);
* the server (in a session and process group of its own, so a Ctrl-C in the terminal reaches pytest, which then
  shuts it down in order) is shut down through its API, then its process group and every process it was seen to
  start are ended by id;
* the browser: Playwright closes the Chromium it launched, then its driver and Chromium's processes, remembered by
  id, are ended if still alive.

Screenshots and the server log go to ``artifacts/browser/`` in the repo root (git-ignored).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.processes import Tree, alive, descendants, spawn

REPO = Path(__file__).resolve().parents[2]
#: The kit's folders served at the root, as ``./kit lab`` shows them (lessons read ``../results`` by relative path).
SERVED_DIRS = ("notebooks", "exercises", "solutions", "results")
#: ``./kit lab``'s ``--LabApp.app_settings_dir``: its ``overrides.json`` turns the news prompt and update check off.
KIT_LAB_SETTINGS = REPO / ".jupyter" / "lab-settings"
#: ``./kit lab``'s ``--config``: the page it opens on, and the lessons' .py sources left out of the file browser.
KIT_SERVER_CONFIG = REPO / ".jupyter" / "jupyter_server_config.json"
ARTIFACTS = REPO / "artifacts" / "browser"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]

#: User settings for the test server: no notebook windowing, so every cell stays in the DOM where the assertions look
#: for it. (The news prompt is *not* turned off here: the kit's overrides must do that, and a test checks it.)
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _jupyter() -> str:
    exe = Path(sys.executable).with_name("jupyter")
    return str(exe) if exe.exists() else shutil.which("jupyter") or "jupyter"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A JupyterLab server started for one test session (see the module docstring)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "work"
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = ARTIFACTS / "jupyter-server.log"
        self.proc: subprocess.Popen | None = None
        self.tree: Tree | None = None
        self._log = None

    def prepare(self) -> None:
        skip = shutil.ignore_patterns(".ipynb_checkpoints")
        for folder in SERVED_DIRS:
            if (REPO / folder).is_dir():
                shutil.copytree(REPO / folder, self.root / folder, ignore=skip)
        for rel, values in LAB_SETTINGS.items():
            path = self.base / "settings" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        for var in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTER_PREFER_ENV_PATH", "JUPYTER_TOKEN"):
            env.pop(var, None)
        dirs = {"JUPYTERLAB_SETTINGS_DIR": "settings", "JUPYTERLAB_WORKSPACES_DIR": "workspaces",
                "JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data", "JUPYTER_RUNTIME_DIR": "runtime",
                "IPYTHONDIR": "ipython"}
        for var, sub in dirs.items():
            (self.base / sub).mkdir(parents=True, exist_ok=True)
            env[var] = str(self.base / sub)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self, timeout: float = 90.0) -> None:
        self.prepare()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        cmd = [_jupyter(), "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
               f"--LabApp.app_settings_dir={KIT_LAB_SETTINGS}",  # as ./kit lab
               f"--config={KIT_SERVER_CONFIG}",  # as ./kit lab: opens on the first lesson, lists each lesson once
               "--ServerApp.terminals_enabled=False",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        self._log = open(self.log_path, "w")
        self.tree = spawn(cmd, env=self.env(), cwd=self.root, stdout=self._log, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL)
        self.proc = self.tree.popen
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.api("status")
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        raise RuntimeError(f"jupyter lab did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def lab_url(self, path: str = "") -> str:
        """The URL that opens ``path`` (relative to the root, e.g. ``exercises/ex01_reference.ipynb``) in JupyterLab."""
        where = f"tree/{path}" if path else ""
        return f"{self.url}/lab/{where}?token={self.token}&reset"

    def track(self) -> None:
        """Remember the ids of the server's descendants (kernels run in their own sessions)."""
        if self.tree is not None:
            self.tree.track()

    def kernel_pids(self) -> list[int]:
        """Live processes the server started (its kernels: it starts nothing else, terminals are off)."""
        return descendants(self.proc.pid) if self.proc is not None and alive(self.proc.pid) else []

    def shutdown_kernels(self, timeout: float = 30.0) -> list[str]:
        """Shut every session's kernel down, then any kernel left without a session, and wait for the kernel processes
        to exit. Returns what is still there after ``timeout`` seconds (empty when all went)."""
        self.track()
        pids = self.kernel_pids()
        for sess in self.api("sessions"):
            with contextlib.suppress(urllib.error.HTTPError):  # 404: it ended meanwhile
                self.api(f"sessions/{sess['id']}", method="DELETE")
        for kernel in self.api("kernels"):
            with contextlib.suppress(urllib.error.HTTPError):
                self.api(f"kernels/{kernel['id']}", method="DELETE")
        deadline = time.monotonic() + timeout
        while True:
            left = [f"kernel {k['id']} ({k.get('execution_state')})" for k in self.api("kernels")]
            left += [f"kernel process {p}" for p in pids + self.kernel_pids() if alive(p)]
            if not left or time.monotonic() > deadline:
                return sorted(set(left))
            time.sleep(0.2)

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self) -> list[int]:
        """Shut the server down (it shuts its kernels down), then end its process group and every process it was seen
        to start, by id: SIGTERM, then SIGKILL. Returns the ids that survived (none, normally)."""
        if self.tree is None:
            return []
        self.track()
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.api("shutdown", method="POST")  # also shuts the kernels down
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=15)
        survivors = self.tree.end()
        if self._log is not None:
            self._log.close()
        self.proc = self.tree = None
        return survivors


@pytest.fixture(scope="session")
def playwright_api():
    """Playwright's sync API; skips (with the reason) when Chromium or Playwright is missing."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found (Debian: apt-get install -y chromium)")
    try:
        from playwright import sync_api
    except ImportError as exc:
        pytest.skip(f"playwright is not installed ({exc}); pip install playwright")
    return sync_api


@pytest.fixture(scope="module")
def lab(playwright_api, tmp_path_factory):
    """A running :class:`LabServer` (started after the skip checks; stopped, with its kernels, when the module's tests
    are done). Module scope, not session: under xdist a session fixture ends only when its worker runs out of tests,
    minutes later, with the server and Chromium idle in memory and the other worker's notebooks starting kernels."""
    server = LabServer(tmp_path_factory.mktemp("jupyterlab"))
    left: list[str] = []
    try:
        server.start()
        yield server
        left = server.shutdown_kernels()  # the page fixture shut each down already: nothing should be left
    finally:
        survivors = server.stop()
    assert not left, f"kernels still running at the end of the browser tests: {left}"
    assert not survivors, f"processes of the JupyterLab server survived SIGKILL: {survivors}"


@pytest.fixture(scope="module")
def browser(playwright_api):
    """Debian's Chromium, headless, launched by Playwright (closed with the module's tests, with its driver)."""
    before = set(descendants(os.getpid()))
    pw = playwright_api.sync_playwright().start()
    # Playwright's driver (node) is a child of this process, and Chromium a child of the driver: remember them by id
    drivers = [Tree(pid) for pid in set(descendants(os.getpid())) - before]
    try:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        for d in drivers:
            d.track()
        try:
            yield b
        finally:
            for d in drivers:
                d.track()
            with contextlib.suppress(Exception):  # after a Ctrl-C the driver may be gone already
                b.close()
    finally:
        with contextlib.suppress(Exception):
            pw.stop()
        survivors = [pid for d in drivers for pid in d.end()]
    assert not survivors, f"Playwright's driver or Chromium survived SIGKILL: {survivors}"


def _new_page(browser):
    """A page (1280x900) in a context of its own, collecting the console's errors; returns ``(context, page)``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    pg.console_errors = []
    pg.on("console", lambda msg: pg.console_errors.append(msg.text) if msg.type == "error" else None)
    return context, pg


@contextlib.contextmanager
def _test_on(pg, lab, request, close_page):
    """Run one test on ``pg``; afterwards save a screenshot if it failed, ``close_page()`` (the page or just the
    test's tabs), shut the test's kernels down, and fail if one is still running."""
    left: list[str] = []
    try:
        yield pg
    finally:
        lab.track()
        rep = getattr(request.node, "rep_call", None)
        try:
            if rep is not None and rep.failed:
                with contextlib.suppress(Exception):
                    pg.screenshot(path=str(ARTIFACTS / f"FAILED-{request.node.name}.png"), full_page=True)
            with contextlib.suppress(Exception):  # after a Ctrl-C Playwright's driver (same process group) is gone
                close_page()
        finally:
            left = lab.shutdown_kernels()  # the notebook's kernel goes when its test is done, as a learner closes it
    assert not left, f"{request.node.name}: kernels still running after the test shut them down: {left}"


@pytest.fixture
def page(browser, lab, request):
    """A fresh browser page (1280x900); on failure a screenshot named after the test is saved in artifacts/."""
    context, pg = _new_page(browser)

    def close():
        if pg.console_errors:  # kept for diagnosis; JupyterLab logs some harmless ones (e.g. offline fetches)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            (ARTIFACTS / f"console-{request.node.name}.txt").write_text("\n".join(pg.console_errors) + "\n")
        context.close()

    with _test_on(pg, lab, request, close):
        yield pg


@pytest.fixture(scope="module")
def desk(browser, lab):
    """One page kept open for a module's tests that only open notebooks (the exercises): JupyterLab loads once and each
    notebook then opens inside it (``open_notebook(..., in_app=True)``), as a learner opens one after another, instead
    of a fresh page loading the whole application per notebook (seconds of Chromium each on 2 cores)."""
    context, pg = _new_page(browser)
    try:
        yield pg
    finally:
        with contextlib.suppress(Exception):
            context.close()


@pytest.fixture
def desk_page(desk, lab, request):
    """:func:`desk` for one test: afterwards its notebooks' tabs are closed (File > Close All Tabs; a notebook the test
    changed without saving asks first, and its changes, the test's own, are discarded) and their kernels shut down,
    as with :func:`page`; on failure a screenshot named after the test is saved."""
    def close_tabs():
        desk.get_by_role("menuitem", name="File", exact=True).click()
        desk.get_by_role("menuitem", name="Close All Tabs", exact=True).click()
        discard = desk.locator(".jp-Dialog button", has_text=re.compile(r"^(Discard|Don't Save)$"))
        deadline = time.monotonic() + 10
        while desk.locator(".jp-NotebookPanel").count() and time.monotonic() < deadline:
            if discard.count():
                discard.first.click()
            time.sleep(0.2)
        desk.wait_for_function("() => !document.querySelector('.jp-NotebookPanel')", timeout=10_000)

    with _test_on(desk, lab, request, close_tabs):
        yield desk


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    if rep.when == "call":
        item.rep_call = rep
    return rep
