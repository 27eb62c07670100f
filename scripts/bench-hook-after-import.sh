#!/bin/bash
# The hook's first answer after a 2,000-note import, and total CPU when two hook processes answer at once.
set -e
B=$(realpath "${MEMORIA_BIN:-${CARGO_TARGET_DIR:-target}/release/memoria}"); M=${MEMORIA_MODEL_DIR:-$HOME/.cache/memoria/models/e5-small-int8}
cd "$(mktemp -d)"
mkdir -p src
python3 - <<'PY'
import random
random.seed(5)
words = "harbour ledger tide river lamp kettle orchard signal copper meadow lantern violin glacier compass pepper marble quartz falcon timber saddle".split()
for i in range(2000):
    body = " ".join(random.choice(words) for _ in range(60))
    open(f"src/note-{i:04d}.md","w").write(f"# Note {i} about {random.choice(words)}\n{body} entry {i}.\n")
PY
export MEMORIA_HOME=$PWD/home MEMORIA_MODEL_DIR=$M
/usr/bin/time -f "import: %e s wall, %U+%S s CPU" $B import src --scope user > /dev/null
P='{"session_id":"s","transcript_path":"/tmp/t.jsonl","cwd":"/tmp","permission_mode":"default","hook_event_name":"UserPromptSubmit","prompt":"Which note talks about the copper lantern and the glacier?"}'
/usr/bin/time -f "first hook: %e s wall, %U+%S s CPU" $B hook claude-code <<< "$P" | head -c 300; echo
/usr/bin/time -f "second hook: %e s wall, %U+%S s CPU" $B hook claude-code <<< "$P" > /dev/null
# Two hooks at once on a second fresh import.
rm -rf home; /usr/bin/time -f "import again: %e s wall" $B import src --scope user > /dev/null
( /usr/bin/time -f "hook A: %e s wall, %U+%S s CPU" $B hook claude-code <<< "$P" > /dev/null ) &
( /usr/bin/time -f "hook B: %e s wall, %U+%S s CPU" $B hook claude-code <<< "$P" > /dev/null ) &
wait
sleep 1
echo "vectors after the two hooks:"; $B --json doctor | python3 -c 'import json,sys; r=json.load(sys.stdin)["recall"]; print(r["documents"], r["documentsWithVectors"])'
