"""The desktop app's benchmarks, measured on the real app driven through WebDriver (a script,
not a test: it asserts nothing about speed). scripts/bench-app.sh runs it under Xvfb.

  start  app start to notes listed on a 1,000-note home: from asking tauri-driver for a session
         (which starts the app) to the first note row in the page; the median and the worst of
         several starts.
  keys   keystroke to results painted on a 10,000-note home: in the page, performance.now()
         just before the search box's input event, then the time of the first frame painted
         after the results of that text are in the DOM (a requestAnimationFrame callback,
         then a task after it); p50 / p95 / max over every keystroke of typed queries. It
         includes waiting for a search still running for an earlier keystroke.
  rss    the app's resident memory once the embedding model is loaded and every note of the
         1,000-note home has its vector (needs --model).

    bench_app.py WORK_DIR [--model DIR] [--starts N] [--notes-keys N] [--only start|keys|rss]
                 [--reuse]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import conftest  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.options import ArgOptions  # noqa: E402

WORDS = ("deploy staging database pricing layout release rollback monitoring latency backup "
         "invoice customer onboarding migration schema index cache queue worker token "
         "session review merge budget roadmap design sprint incident postmortem").split()

QUERIES = ["deploy staging", "pricing layout", "rollback plan", "database migration",
           "incident postmortem", "customer onboarding", "cache latency", "release notes"]


def make_home(root: Path, n: int, reuse: bool = False) -> conftest.Home:
    """A home with `n` notes imported from a folder of Markdown files by the real CLI; with
    `reuse`, a home this script filled before is used as it is."""
    home = conftest.Home(root / f"home-{n}")
    marker = home.path / ".bench-notes"
    if reuse and marker.exists() and marker.read_text() == str(n):
        return home
    if home.path.exists():
        shutil.rmtree(home.path)
    home.path.mkdir(parents=True)
    vault = root / f"vault-{n}"
    shutil.rmtree(vault, ignore_errors=True)
    vault.mkdir()
    # Writes through Memoria stop at a scope's note limit (5,000); files put into the notes
    # folder by other programs (a copied vault) are indexed whatever their number.
    imported = min(n, 5000)
    user_dir = home.path / "memory" / "user"

    def write(folder, i):
        w = [WORDS[(i * k + k) % len(WORDS)] for k in (1, 3, 7, 11, 13)]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{i:05d}.md").write_text(
            f"---\nid: note-{i:05d}\nsummary: Note {i} about {w[0]} and {w[1]}\ntags: [{w[2]}]\n---\n"
            f"The {w[0]} {w[3]} work touches the {w[1]} {w[4]}. Item {i}: {w[2]} {w[3]}.\n")

    for i in range(imported):
        write(vault, i)
    home.cli("import", str(vault), "--scope", "user")
    for i in range(imported, n):
        write(user_dir, i)
    listed = len(home.cli("list"))
    if listed != n:
        raise RuntimeError(f"the home lists {listed} notes, not {n}")
    marker.write_text(str(n))
    return home


def rss_kib(exe):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/exe") == exe:
                status = Path(f"/proc/{pid}/status").read_text()
                return int(next(l for l in status.splitlines() if l.startswith("VmRSS:")).split()[1])
        except OSError:
            continue
    return None


class Running:
    """tauri-driver and the app started on a home; `started_s` is the session's creation."""

    def __init__(self, home, shots: Path, extra_env=None):
        # The app's daily consolidation pass would fold the generated notes (many share their
        # words) in the background of the first start, rewriting files while the start is
        # measured: the home records a pass as run now, so none is due.
        marker = home.path / "review" / "consolidation.json"
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"lastPassAt": int(time.time() * 1000)}))
        env = home.env()
        env.update(extra_env or {})
        shots.mkdir(parents=True, exist_ok=True)
        self.port, native = conftest.free_port(), conftest.free_port()
        self.log = open(shots / "tauri-driver.log", "w")
        self.proc = subprocess.Popen(
            [conftest.DRIVER, "--port", str(self.port), "--native-port", str(native)],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        conftest.wait_port(self.port, self.proc, "tauri-driver")
        conftest.wait_port(native, self.proc, "WebKitWebDriver")
        opts = ArgOptions()
        opts.set_capability("browserName", "wry")
        opts.set_capability("tauri:options", {"application": conftest.APP})
        t0 = time.monotonic()
        self.driver = webdriver.Remote(f"http://127.0.0.1:{self.port}", options=opts)
        self.session_s = time.monotonic() - t0
        self.t0 = t0
        self.driver.set_script_timeout(120)
        self.app = conftest.App(self.driver, shots)

    def until_listed(self):
        """Seconds from the session request to the first note row in the page, and the page's
        own clock then (its time since the web view started loading it)."""
        while True:
            page_ms = self.driver.execute_script(
                "return document.querySelector(\"[data-testid='note-item']\") ? performance.now() : null;")
            if page_ms is not None:
                return time.monotonic() - self.t0, page_ms / 1000
            if time.monotonic() - self.t0 > 120:
                raise RuntimeError("no note listed in 120 s")
            time.sleep(0.01)

    def stop(self):
        try:
            self.driver.quit()
        finally:
            self.proc.terminate()
            self.proc.wait(10)
            self.log.close()


KEYSTROKE_JS = """
const [text, done] = [arguments[0], arguments[arguments.length - 1]];
const input = document.querySelector("[data-testid='search-input']");
const t0 = performance.now();
input.value = text;
input.dispatchEvent(new InputEvent('input', {bubbles: true, data: text.slice(-1), inputType: 'insertText'}));
const painted = () => requestAnimationFrame(() => setTimeout(() => done(performance.now() - t0), 0));
const ready = () => document.querySelector(`[data-results-for="${CSS.escape(text.trim())}"]`);
if (ready()) { painted(); return; }
const obs = new MutationObserver(() => { if (ready()) { obs.disconnect(); painted(); } });
obs.observe(document.body, {subtree: true, childList: true, attributes: true, attributeFilter: ['data-results-for']});
setTimeout(() => { obs.disconnect(); done(-1); }, 10000);
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def bench_start(home, out, starts, env):
    times, page, session = [], [], []
    for i in range(starts):
        r = Running(home, out / f"start-{i}", env)
        try:
            total, in_page = r.until_listed()
            times.append(total)
            page.append(in_page)
            session.append(r.session_s)
            if i == 0:
                r.app.shot("listed")
        finally:
            r.stop()
    return {"notes": 1000, "starts": starts, "median_s": statistics.median(times),
            "max_s": max(times), "all_s": times,
            "page_median_s": statistics.median(page),
            "session_median_s": statistics.median(session)}


def until_indexed(r, notes, vectors=False, timeout=900):
    """Waits until recall holds every note (a first start indexes in the background, and
    searches meanwhile see only part of the notes) and, with `vectors`, every note has its
    vector; returns the engine card."""
    deadline = time.monotonic() + timeout
    card = {}
    while time.monotonic() < deadline:
        card = (r.app.invoke("overview").get("ok") or {}).get("engine") or {}
        done = card.get("documentsWithVectors", 0) if vectors else card.get("documents", 0)
        if done >= notes and card.get("pendingEmbeddings") == 0:
            return card
        time.sleep(1)
    raise RuntimeError(f"recall did not index {notes} notes in {timeout} s: {card}")


def bench_keys(home, out, env):
    r = Running(home, out / "keys", env)
    try:
        r.until_listed()
        card = until_indexed(r, int((home.path / ".bench-notes").read_text()))
        r.app.one("search-input").click()
        lat = []
        for q in QUERIES:
            for k in range(1, len(q) + 1):
                ms = r.driver.execute_async_script(KEYSTROKE_JS, q[:k])
                # A typed space searches the same words again: its results look like the last.
                if ms >= 0 and q[:k].strip() != q[:k - 1].strip():
                    lat.append(ms)
                time.sleep(0.15)
            r.app.shot("results-" + q.replace(" ", "-"))
        return {"notes": card.get("documents"), "embedder": card.get("embedder"), "keystrokes": len(lat),
                "p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95), "max_ms": max(lat)}
    finally:
        r.stop()


def bench_rss(home, out, model):
    r = Running(home, out / "rss", {"MEMORIA_MODEL_DIR": str(model)})
    try:
        r.until_listed()
        card = until_indexed(r, 1000, vectors=True)
        kib = rss_kib(os.path.realpath(conftest.APP))
        return {"notes": card.get("documents"), "embedder": card.get("embedder"),
                "with_vectors": card.get("documentsWithVectors"),
                "rss_mib": kib and round(kib / 1024)}
    finally:
        r.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--notes-keys", type=int, default=10000)
    ap.add_argument("--only", choices=["start", "keys", "rss"], action="append")
    ap.add_argument("--reuse", action="store_true", help="use the homes a run filled before")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    only = set(a.only or ["start", "keys", "rss"])
    results = {"app": conftest.APP}
    small = make_home(a.work, 1000, a.reuse) if only & {"start", "rss"} else None
    if "start" in only:
        results["start"] = bench_start(small, a.work / "shots", a.starts, {})
        print(json.dumps(results["start"]), flush=True)
    if "keys" in only:
        big = make_home(a.work, a.notes_keys, a.reuse)
        results["keys"] = bench_keys(big, a.work / "shots", {})
        print(json.dumps(results["keys"]), flush=True)
    if "rss" in only and a.model:
        results["rss"] = bench_rss(small, a.work / "shots", a.model)
        print(json.dumps(results["rss"]), flush=True)
    (a.work / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
