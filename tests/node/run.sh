#!/usr/bin/env bash
# Runs the official `openai` npm client (tests/node/openai.test.mjs, and docs/examples/warm-key.mjs
# through warm-key.test.mjs; tool calls and structured output in tool-calls.test.mjs) and the official
# `@anthropic-ai/sdk` client (anthropic.test.mjs) against a real prefixd server; images in chats
# through the `openai` client (images.test.mjs).
# Usage: run.sh PATH_TO_PREFIXD PATH_TO_TINY_MODEL
# Installs the locked packages into tests/node/node_modules on first use (needs the npm registry).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 PATH_TO_PREFIXD PATH_TO_TINY_MODEL" >&2
  exit 2
fi
prefixd=$(realpath "$1")
model=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

if [ ! -f node_modules/openai/package.json ] || [ ! -f node_modules/@anthropic-ai/sdk/package.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

port=$(node "$here/../support/free-port.cjs")
log=$(mktemp /tmp/prefixd-node-test-XXXXXX)

# The server must not pick up a developer's PREFIXD_* settings (an API key would fail every call),
# nor write the user's model fingerprint cache. A request that sends no seed samples with a fixed
# one (--seed), so every run of the suite sees the same replies.
# One compute thread, as every test server (tests/integration/server_process.cpp says why).
# The tiny model's vision projector (generated beside it): images.test.mjs sends images.
projector=$(dirname "$model")/tiny-mmproj.gguf
[ -f "$projector" ] || { echo "$0: no vision projector at $projector" >&2; exit 2; }
env $(env | sed -n 's/^\(PREFIXD_[A-Z_]*\)=.*/-u \1/p') \
  "$prefixd" serve --model "$model" --mmproj "$projector" --host 127.0.0.1 --port "$port" --ctx-size 2048 \
  --parallel 4 --model-fingerprint-cache off --no-cache-disk --seed 20241201 --threads 1 >"$log" 2>&1 &
pid=$!

. "$here/../support/await-prefixd.sh"

PREFIXD_BASE_URL="http://127.0.0.1:$port/v1" PREFIXD_MODEL_ID=$(basename "$model" .gguf) \
  node --test --test-reporter=spec openai.test.mjs warm-key.test.mjs tool-calls.test.mjs anthropic.test.mjs responses.test.mjs \
    images.test.mjs
