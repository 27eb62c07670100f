"""Checks a package's app as installed, on an empty home: started through tauri-driver with no
model folder configured, its engine card must name the semantic model from the package's own
resources (never the hash fallback). Prints the card, the app's resident memory with the model
loaded, and saves a screenshot of the Overview page beside the home.

    MEMORIA_E2E_APP=<extracted>/usr/bin/memoria-desktop python check_bundle.py HOME_DIR

scripts/bundle.sh runs it under Xvfb on the .deb it just built.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault(
    "MEMORIA_E2E_DRIVER",
    str(Path(os.environ.get("MEMORIA_TOOLS_DIR", Path.home() / ".cache/memoria/tools"))
        / "cargo/bin/tauri-driver"),
)

import conftest  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.options import ArgOptions  # noqa: E402


def rss_kib(exe):
    """The resident memory of the running process whose executable is `exe`."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/exe") == exe:
                status = Path(f"/proc/{pid}/status").read_text()
                return int(next(l for l in status.splitlines() if l.startswith("VmRSS:")).split()[1])
        except OSError:
            continue
    return None


def main():
    app_bin = os.path.realpath(conftest.APP)
    home = conftest.Home(Path(sys.argv[1]))
    home.path.mkdir(parents=True, exist_ok=True)
    env = home.env()
    env.pop("ORT_DYLIB_PATH", None)
    env.pop("MEMORIA_MODEL_DIR", None)
    port, native = conftest.free_port(), conftest.free_port()
    shots = home.path.parent / "shots"
    shots.mkdir(exist_ok=True)
    log = open(shots / "tauri-driver.log", "w")
    proc = subprocess.Popen([conftest.DRIVER, "--port", str(port), "--native-port", str(native)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    driver = None
    try:
        conftest.wait_port(port, proc, "tauri-driver")
        conftest.wait_port(native, proc, "WebKitWebDriver")
        opts = ArgOptions()
        opts.set_capability("browserName", "wry")
        opts.set_capability("tauri:options", {"application": app_bin})
        driver = webdriver.Remote(f"http://127.0.0.1:{port}", options=opts)
        driver.set_script_timeout(120)
        app = conftest.App(driver, shots)
        deadline = time.monotonic() + 120
        while True:
            r = app.invoke("overview")
            card = (r.get("ok") or {}).get("engine") or {}
            if card.get("embedder") == "onnx" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        print(json.dumps(card, indent=2))
        rss = rss_kib(app_bin)
        print(f"app RSS with the model loaded: {rss and rss // 1024} MiB")
        app.click("nav-overview")
        app.one("engine-card")
        app.shot("overview-bundled-model")
        resources = str(Path(app_bin).parent.parent / "lib")
        assert card.get("embedder") == "onnx", f"recall runs on the hash fallback: {card}"
        assert (card.get("modelDir") or "").startswith(resources), card
        print("bundle check: semantic recall runs on the packaged model")
    finally:
        if driver is not None:
            driver.quit()
        proc.terminate()
        proc.wait(10)
        log.close()


if __name__ == "__main__":
    main()
