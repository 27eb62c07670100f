#!/usr/bin/env python3
"""What one prompt costs the other processes on a home: three long-running `memoria mcp`
servers (an app and two agent sessions, say) share one home of N notes; on each prompt the
Claude Code hook (a one-shot process) answers and counts its recalled notes as used, which is
a write every other process notices on its next search.

For each prompt, each server searches twice: once before the hook (nothing changed since its
last search) and once after (it sees another process's write and catches up). The reload cost
per prompt is the difference between those two search times; the servers' CPU over the whole
run is reported beside it.

    scripts/bench-reload.py [--notes 5000] [--prompts 40] [--servers 3]

The binary is $MEMORIA_BIN, else $CARGO_TARGET_DIR/release/memoria; the model
$MEMORIA_MODEL_DIR, else ~/.cache/memoria/models/e5-small-int8. Only the standard library.
"""

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = (
    "harbour ledger tide river lamp kettle orchard signal copper meadow lantern violin glacier "
    "compass pepper marble quartz falcon timber saddle beacon canyon thimble walnut cobalt "
    "prairie anchor sparrow furnace velvet"
).split()


class Server:
    """One `memoria mcp` over stdio (newline-delimited JSON-RPC)."""

    def __init__(self, binary, env):
        self.proc = subprocess.Popen(
            [binary, "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        self.next_id = 1
        self.call("initialize", {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench-reload", "version": "1"},
        })
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def call(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                sys.exit(f"bench-reload: the MCP server {self.proc.pid} exited")
            msg = json.loads(line)
            if msg.get("id") == rid:
                if "error" in msg:
                    sys.exit(f"bench-reload: {method}: {msg['error']}")
                return msg["result"]

    def search(self, query):
        """Seconds one memory_search takes, answer read."""
        start = time.perf_counter()
        r = self.call("tools/call", {"name": "memory_search", "arguments": {"query": query}})
        took = time.perf_counter() - start
        if r.get("isError"):
            sys.exit(f"bench-reload: memory_search failed: {r}")
        return took

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        """Seconds the server took to exit once its input closed (killed after a minute)."""
        start = time.perf_counter()
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        return time.perf_counter() - start


def note(i, rng):
    """A note with one fact a question can name: its project, port and owner."""
    name = f"{WORDS[i % len(WORDS)].capitalize()} {i}"
    filler = " ".join(rng.choice(WORDS) for _ in range(40))
    return (f"# How project {name} is deployed\n"
            f"Project {name} listens on port {8000 + i} and is owned by the {rng.choice(WORDS)} "
            f"team. Deploys go out on Tuesdays after the tests pass. {filler}.\n")


def query(rng, notes):
    i = rng.randrange(notes)
    return f"Which port does project {WORDS[i % len(WORDS)].capitalize()} {i} listen on?"


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, default=5000)
    ap.add_argument("--prompts", type=int, default=40)
    ap.add_argument("--servers", type=int, default=3)
    args = ap.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    binary = os.path.realpath(os.environ.get("MEMORIA_BIN", f"{target}/release/memoria"))
    model = os.environ.get(
        "MEMORIA_MODEL_DIR", os.path.expanduser("~/.cache/memoria/models/e5-small-int8"))
    if not os.access(binary, os.X_OK):
        sys.exit(f"bench-reload: no memoria binary at {binary} (set MEMORIA_BIN)")

    work = tempfile.mkdtemp(prefix="bench-reload-")
    env = dict(os.environ, MEMORIA_HOME=f"{work}/home", MEMORIA_MODEL_DIR=model)
    rng = random.Random(5)
    src = f"{work}/src"
    os.makedirs(src)
    for i in range(args.notes):
        with open(f"{src}/note-{i:05d}.md", "w") as f:
            f.write(note(i, rng))
    subprocess.run([binary, "import", src, "--scope", "user"], env=env, check=True,
                   stdout=subprocess.DEVNULL)

    servers = [Server(binary, env) for _ in range(args.servers)]
    # The first search opens each server's index; one of them embeds the notes.
    for s in servers:
        s.search(query(rng, args.notes))
    start = time.time()
    while True:
        out = subprocess.run([binary, "--json", "doctor"], env=env, capture_output=True,
                             text=True)
        r = json.loads(out.stdout)["recall"]
        if r["documentsWithVectors"] >= r["documents"] >= args.notes:
            break
        if time.time() - start > 3600:
            sys.exit(f"bench-reload: vectors {r['documentsWithVectors']} of {r['documents']}")
        time.sleep(2)
    print(f"{args.notes} notes, every vector ready {time.time() - start:.0f} s after the servers started; "
          f"{args.servers} servers, {args.prompts} prompts, {binary}")
    for s in servers:  # every server has loaded every vector
        s.search(query(rng, args.notes))

    cpu0 = [s.cpu_seconds() for s in servers]
    quiet, after, hook = [], [], []
    for _ in range(args.prompts):
        for s in servers:
            quiet.append(s.search(query(rng, args.notes)))
        prompt = json.dumps({
            "session_id": "s", "transcript_path": f"{work}/t.jsonl", "cwd": work,
            "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
            "prompt": query(rng, args.notes),
        })
        t = time.perf_counter()
        subprocess.run([binary, "hook", "claude-code"], input=prompt, env=env, text=True,
                       check=True, stdout=subprocess.DEVNULL)
        hook.append(time.perf_counter() - t)
        for s in servers:
            after.append(s.search(query(rng, args.notes)))
    cpu = [s.cpu_seconds() - c for s, c in zip(servers, cpu0)]
    # The hooks' writes the servers had to notice: uses counted in the recall store.
    db = sqlite3.connect(f"{work}/home/index/recall/docs.sqlite")
    uses = db.execute("SELECT coalesce(sum(access_count), 0) FROM docs").fetchone()[0]

    ms = lambda v: f"{v * 1000:.1f}"
    print(f"search, nothing changed:     p50 {ms(pct(quiet, 50))} ms, p95 {ms(pct(quiet, 95))} ms")
    print(f"search after another's hook: p50 {ms(pct(after, 50))} ms, p95 {ms(pct(after, 95))} ms")
    print(f"reload cost per prompt per server (median difference): "
          f"{ms(statistics.median(after) - statistics.median(quiet))} ms")
    print(f"hook: p50 {ms(pct(hook, 50))} ms; uses counted in the recall store: {uses}")
    if uses == 0:
        sys.exit("bench-reload: the hooks counted no use, so nothing was measured")
    print(f"servers' CPU over the run: {', '.join(f'{c:.2f}' for c in cpu)} s "
          f"({ms(sum(cpu) / args.prompts)} ms per prompt for all {args.servers}, "
          f"{2 * args.servers} searches each prompt)")
    exits = [s.close() for s in servers]
    print("servers' exit after their input closed: "
          + ", ".join("killed after 60 s" if e is None else f"{e:.2f} s" for e in exits))


if __name__ == "__main__":
    main()
