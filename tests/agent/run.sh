#!/usr/bin/env bash
# Runs a real coding agent's CLI, qwen-code (tests/agent/qwen-code.test.mjs), headless against a
# real prefixd server whose prefill outlasts the agent's stream idle timeout.
# Usage: run.sh PATH_TO_PREFIXD PATH_TO_TINY_MODEL
# Installs the pinned package into tests/agent/node_modules on first use (needs the npm registry).
# There is no lock file: the package is pinned exactly and has no dependencies but optional ones
# (a clipboard, a terminal, image resizing), which headless runs never load and are not installed.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 PATH_TO_PREFIXD PATH_TO_TINY_MODEL" >&2
  exit 2
fi
prefixd=$(realpath "$1")
model=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

if [ ! -f node_modules/@qwen-code/qwen-code/package.json ]; then
  npm install --omit=optional --no-package-lock --no-audit --no-fund --loglevel=error
fi

port=$(node "$here/../support/free-port.cjs")
log=$(mktemp /tmp/prefixd-agent-test-XXXXXX)

# The server must not pick up a developer's PREFIXD_* settings. One compute thread, as every test
# server (tests/integration/server_process.cpp says why): the agent's first prompt (about 24k
# tokens of the tiny model's vocabulary) then takes several seconds to prefill, longer than the
# idle timeout the test gives the agent, and a keep-alive every half second must carry it.
env $(env | sed -n 's/^\(PREFIXD_[A-Z_]*\)=.*/-u \1/p') \
  "$prefixd" serve --model "$model" --host 127.0.0.1 --port "$port" --ctx-size 65536 --parallel 1 \
  --model-fingerprint-cache off --no-cache-disk --seed 20241201 --threads 1 --stream-keepalive 0.5 >"$log" 2>&1 &
pid=$!

. "$here/../support/await-prefixd.sh"

PREFIXD_BASE_URL="http://127.0.0.1:$port" PREFIXD_MODEL_ID=$(basename "$model" .gguf) \
  node --test --test-reporter=spec qwen-code.test.mjs
