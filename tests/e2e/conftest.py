"""The end-to-end harness: the real app (a debug build with the UI embedded) driven through
tauri-driver and WebKitWebDriver, on a temporary MEMORIA_HOME that the real `memoria` CLI
shares. Run it with tests/e2e/run.sh (which finds the binaries), under a display (xvfb-run).

Every test gets a fresh home; `app` starts the app on it and, at teardown, saves a last
screenshot. `shot(name)` saves one mid-test. Screenshots go to $MEMORIA_E2E_OUT
(default tests/e2e/out/), one folder per test.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.options import ArgOptions
from selenium.webdriver.support.ui import WebDriverWait

APP = os.environ.get("MEMORIA_E2E_APP", "")
CLI = os.environ.get("MEMORIA_E2E_CLI", "")
SYNC = os.environ.get("MEMORIA_E2E_SYNC", "")
DRIVER = os.environ.get("MEMORIA_E2E_DRIVER", "tauri-driver")
OUT = Path(os.environ.get("MEMORIA_E2E_OUT", Path(__file__).parent / "out"))
# Long enough for a first start on a busy two-core machine; a passing step takes far less.
WAIT_S = float(os.environ.get("MEMORIA_E2E_WAIT_S", "30"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} in {timeout} s")


class Home:
    """A MEMORIA_HOME with the CLI pointed at it."""

    def __init__(self, path: Path, token: str | None = None):
        self.path = path
        self.token = token

    def env(self):
        env = dict(os.environ)
        env["MEMORIA_HOME"] = str(self.path)
        env.pop("MEMORIA_MODEL_DIR", None)
        # Test tokens stay out of any desktop keychain: no session bus, the token from the
        # environment.
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        env["XDG_RUNTIME_DIR"] = str(self.path)
        if self.token:
            env["MEMORIA_SYNC_TOKEN"] = self.token
        return env

    def cli(self, *args, check=True):
        p = subprocess.run(
            [CLI, "--json", *args],
            env=self.env(),
            cwd=self.path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and p.returncode != 0:
            raise AssertionError(f"memoria {args} failed: {p.stderr}")
        return json.loads(p.stdout) if p.stdout.strip() else None


class App:
    """The running app: the WebDriver session and helpers over data-testid hooks."""

    def __init__(self, driver, shots: Path):
        self.driver = driver
        self.shots = shots
        self.n = 0

    def shot(self, name):
        self.n += 1
        path = self.shots / f"{self.n:02d}-{name}.png"
        # WebKitWebDriver captures the last frame painted, which can lag the page: wait for two
        # animation frames so the picture shows what the test just checked.
        self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "requestAnimationFrame(() => requestAnimationFrame(() => done(true)));"
        )
        self.driver.save_screenshot(str(path))
        return path

    def wait(self, cond, what, timeout=WAIT_S):
        return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(
            lambda d: cond(), message=what
        )

    def all(self, testid):
        return self.driver.find_elements(By.CSS_SELECTOR, f'[data-testid="{testid}"]')

    def one(self, testid, timeout=WAIT_S):
        return self.wait(
            lambda: next(iter(self.visible(testid)), None), f"no visible [{testid}]", timeout
        )

    def visible(self, testid):
        return [e for e in self.all(testid) if e.is_displayed()]

    def click(self, testid):
        self.one(testid).click()

    def text_of(self, testid):
        return self.driver.execute_script(
            "return [...document.querySelectorAll(`[data-testid='${arguments[0]}']`)]"
            ".map(e => e.textContent);",
            testid,
        )

    def wait_text(self, testid, needle, timeout=WAIT_S):
        """Waits until some [testid] element's text holds `needle`; returns that element."""
        def found():
            # textContent, read in the page: WebKitWebDriver's element text is slow and
            # fails on elements re-rendered meanwhile.
            return self.driver.execute_script(
                "return [...document.querySelectorAll(`[data-testid='${arguments[0]}']`)]"
                ".find(e => e.textContent.includes(arguments[1])) || null;",
                testid,
                needle,
            )

        return self.wait(found, f"no [{testid}] showing {needle!r}", timeout)

    def invoke(self, command, args=None):
        """Calls a command of the shell directly, as the UI's backend module does."""
        return self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "window.__TAURI__.core.invoke(arguments[0], arguments[1])"
            ".then(v => done({ok: v}), e => done({err: e}));",
            command,
            args or {},
        )

    def styled(self):
        """The page's stylesheet is applied: the body has a font and the root a background
        that are not the browser's defaults."""
        return self.driver.execute_script(
            "const s = getComputedStyle(document.body);"
            "return {font: s.fontFamily, bg: getComputedStyle(document.documentElement)"
            ".backgroundColor, bodyBg: s.backgroundColor, sheets: document.styleSheets.length};"
        )


@pytest.fixture
def tmp_root():
    d = Path(tempfile.mkdtemp(prefix="memoria-e2e-")).resolve()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def home(tmp_root):
    h = Home(tmp_root / "home")
    h.path.mkdir()
    return h


def safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


@pytest.fixture
def launch(request):
    """Starts the app on a home (and an environment of its own); stops it at teardown."""
    running = []

    def start(home: Home, extra_env=None):
        shots = OUT / safe(request.node.name)
        # A second app in the same test (another machine) adds its shots beside the first's.
        if not running:
            shutil.rmtree(shots, ignore_errors=True)
        shots.mkdir(parents=True, exist_ok=True)
        env = home.env()
        env.update(extra_env or {})
        port, native = free_port(), free_port()
        log = open(shots / ("tauri-driver.log" if not running else f"tauri-driver-{len(running) + 1}.log"), "w")
        proc = subprocess.Popen(
            [DRIVER, "--port", str(port), "--native-port", str(native)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        running.append((proc, None, log))
        wait_port(port, proc, "tauri-driver")
        # tauri-driver answers before the WebKitWebDriver it starts does.
        wait_port(native, proc, "WebKitWebDriver")
        opts = ArgOptions()
        opts.set_capability("browserName", "wry")
        opts.set_capability("tauri:options", {"application": APP})
        driver = webdriver.Remote(f"http://127.0.0.1:{port}", options=opts)
        driver.set_script_timeout(WAIT_S)
        app = App(driver, shots)
        running[-1] = (proc, app, log)
        return app

    yield start
    for proc, app, log in reversed(running):
        if app is not None:
            try:
                app.shot("end")
            except WebDriverException:
                pass
            try:
                app.driver.quit()
            except WebDriverException:
                pass
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture
def app(home, launch):
    return launch(home)


class SyncServer:
    """A real `memoria-sync` over a folder store on a free port."""

    ADMIN_KEY = "admin-key-for-e2e-tests-0123456789abcdef"

    def __init__(self, root: Path):
        self.store = f"fs:{root / 'store'}"
        self.env = dict(os.environ, MEMORIA_SYNC_ADMIN_KEY=self.ADMIN_KEY, MEMORIA_SYNC_LOG="warn")
        self.proc = subprocess.Popen(
            [SYNC, "serve", "--store", self.store, "--listen", "127.0.0.1:0"],
            env=self.env,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://\S+)", line)
        if not m:
            raise RuntimeError(f"memoria-sync said {line!r}")
        self.url = m.group(1)

    def token(self, user):
        out = subprocess.run(
            [SYNC, "token", "create", "--store", self.store, "--user", user],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return out.strip().splitlines()[-1].strip()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def sync_server(tmp_root):
    s = SyncServer(tmp_root)
    yield s
    s.stop()
