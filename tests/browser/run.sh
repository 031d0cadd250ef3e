#!/usr/bin/env bash
# Runs the built-in web UI (webui/, served by prefixd at /, /cache and /ui/*) in headless
# Chromium against three real prefixd servers (webui.test.mjs says what is checked):
# - one without a key that serves webui/ from the working tree (--webui-dir), with n-gram
#   speculative decoding (--spec-type ngram), whose draft counts the chat page shows;
# - one with --api-key that serves the copy compiled into the binary, which must be the same
#   bytes as webui/ (a binary built before the last edit of webui/ fails: rebuild it);
# - one with --api-keys (a key file of three tenants: an admin key of `ops`, a key of `acme` and
#   one of `globex`), for the cache page's per-tenant view;
# - one with every layer on a GPU (--gpu-layers 99; here Mesa's lavapipe, which ggml's Vulkan
#   backend uses when named: GGML_VK_VISIBLE_DEVICES=0), for the device card's GPU memory. It is
#   left out when PREFIXD_TEST_NO_GPU=1 (a native build without a Vulkan backend, as the gpu
#   label's tests).
# Screenshots go to $PREFIXD_TEST_ARTIFACTS (default: build/test-artifacts/webui).
# Usage: run.sh PATH_TO_PREFIXD PATH_TO_TINY_MODEL
# Needs Debian's chromium (chromium.sh finds it) and, on first use, the npm registry to install
# the locked playwright-core into tests/browser/node_modules.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 PATH_TO_PREFIXD PATH_TO_TINY_MODEL" >&2
  exit 2
fi
prefixd=$(realpath "$1")
model=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$here"

# No Chromium is a failure, not a skip: make test installs it on the host, so its absence means
# the setup is broken, and a skipped browser test would hide that.
if ! version=$("$here/chromium.sh" --version 2>/dev/null); then
  echo "$0: cannot run Chromium: tests/browser/chromium.sh found none that starts." >&2
  "$here/chromium.sh" --version >/dev/null || true
  echo "Install it on the host (apt-get install chromium); inside scripts/in-env it is used through /host." >&2
  exit 1
fi
echo "browser: $version"

if [ ! -f node_modules/playwright-core/package.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

artifacts=${PREFIXD_TEST_ARTIFACTS:-$repo/build/test-artifacts/webui}
mkdir -p "$artifacts"
artifacts=$(realpath "$artifacts")

# A free port that is none of the ports given: free-port.cjs avoids one of them, and a draw that
# hits another is drawn again.
free_port() {
  local candidate avoid taken
  for _ in $(seq 1 64); do
    candidate=$(node "$repo/tests/support/free-port.cjs" "${1:-0}") || return 1
    taken=0
    for avoid in "$@"; do
      if [ "$candidate" = "$avoid" ]; then taken=1; fi
    done
    if [ "$taken" -eq 0 ]; then
      echo "$candidate"
      return 0
    fi
  done
  echo "$0: no free port found" >&2
  return 1
}
random_key() { echo "sk-webui-$1-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"; }
port=$(free_port)
keyed_port=$(free_port "$port")
tenants_port=$(free_port "$port" "$keyed_port")
gpu_port=$(free_port "$port" "$keyed_port" "$tenants_port")
with_gpu=1
if [ "${PREFIXD_TEST_NO_GPU:-}" = 1 ]; then with_gpu=0; fi
api_key=$(random_key keyed)
admin_key=$(random_key ops)
acme_key=$(random_key acme)
globex_key=$(random_key globex)
log=$(mktemp /tmp/prefixd-webui-test-XXXXXX)
keyed_log=$(mktemp /tmp/prefixd-webui-test-keyed-XXXXXX)
tenants_log=$(mktemp /tmp/prefixd-webui-test-tenants-XXXXXX)
gpu_log=$(mktemp /tmp/prefixd-webui-test-gpu-XXXXXX)
# The key file's format: docs/operator-guide.md, "Keys and tenants". mktemp makes it readable by
# this user only.
keys_file=$(mktemp /tmp/prefixd-webui-test-keys-XXXXXX)
printf '%s ops admin\n%s acme\n%s globex\n' "$admin_key" "$acme_key" "$globex_key" >"$keys_file"

# The servers must not pick up a developer's PREFIXD_* settings (an API key would fail every
# call), nor write the user's model fingerprint cache. A request that sends no seed samples with
# a fixed one (--seed). One compute thread, as every test server
# (tests/integration/server_process.cpp says why).
start_server() {
  env $(env | sed -n 's/^\(PREFIXD_[A-Z_]*\)=.*/-u \1/p') \
    "$prefixd" serve --model "$model" --host 127.0.0.1 --port "$1" --ctx-size 2048 --parallel 2 \
    --model-fingerprint-cache off --no-cache-disk --seed 20241201 --threads 1 "${@:3}" >"$2" 2>&1 &
}
start_server "$port" "$log" --webui-dir "$repo/webui" --spec-type ngram
pid=$!
start_server "$keyed_port" "$keyed_log" --api-key "$api_key"
keyed_pid=$!
start_server "$tenants_port" "$tenants_log" --api-keys "$keys_file"
tenants_pid=$!
gpu_pid=
if [ "$with_gpu" = 1 ]; then
  GGML_VK_VISIBLE_DEVICES=0 start_server "$gpu_port" "$gpu_log" --gpu-layers 99
  gpu_pid=$!
fi

cleanup() {
  status=$?
  kill "$pid" "$keyed_pid" "$tenants_pid" $gpu_pid 2>/dev/null || true
  wait "$pid" "$keyed_pid" "$tenants_pid" $gpu_pid 2>/dev/null || true
  if [ "$status" -ne 0 ]; then
    echo "--- prefixd log (no key) ---" >&2
    cat "$log" >&2
    echo "--- prefixd log (--api-key) ---" >&2
    cat "$keyed_log" >&2
    echo "--- prefixd log (--api-keys) ---" >&2
    cat "$tenants_log" >&2
    if [ -n "$gpu_pid" ]; then
      echo "--- prefixd log (--gpu-layers 99) ---" >&2
      cat "$gpu_log" >&2
    fi
  fi
  rm -f "$log" "$keyed_log" "$tenants_log" "$gpu_log" "$keys_file"
  exit "$status"
}
trap cleanup EXIT

wait_healthy() {
  for _ in $(seq 1 600); do
    if ! kill -0 "$1" 2>/dev/null; then
      echo "prefixd ($3) exited during startup" >&2
      return 1
    fi
    if node -e "fetch('http://127.0.0.1:$2/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"; then
      return 0
    fi
    sleep 0.1
  done
  echo "prefixd ($3) did not answer /health within 60 s" >&2
  return 1
}
wait_healthy "$pid" "$port" "no key"
wait_healthy "$keyed_pid" "$keyed_port" "--api-key"
wait_healthy "$tenants_pid" "$tenants_port" "--api-keys"
gpu_url=
if [ -n "$gpu_pid" ]; then
  wait_healthy "$gpu_pid" "$gpu_port" "--gpu-layers 99"
  gpu_url="http://127.0.0.1:$gpu_port"
fi

# The keyed server's UI is the one compiled in: it must be today's webui/, byte for byte.
if ! node -e '
const fs = require("fs");
const path = require("path");
const [base, dir] = process.argv.slice(1);
const files = fs.readdirSync(dir, { recursive: true, withFileTypes: true })
  .filter((d) => d.isFile()).map((d) => path.relative(dir, path.join(d.parentPath, d.name)));
(async () => {
  const differ = [];
  for (const name of files) {
    const response = await fetch(base + (name === "index.html" ? "/" : "/ui/" + name));
    const body = Buffer.from(await response.arrayBuffer());
    if (!response.ok || !body.equals(fs.readFileSync(path.join(dir, name)))) differ.push(name);
  }
  if (differ.length) {
    console.error("the web UI compiled into prefixd is not webui/ (" + differ.join(", ") + " differ): rebuild prefixd");
    process.exit(1);
  }
})();' "http://127.0.0.1:$keyed_port" "$repo/webui"; then
  exit 1
fi

PREFIXD_WEBUI_URL="http://127.0.0.1:$port" PREFIXD_WEBUI_KEYED_URL="http://127.0.0.1:$keyed_port" \
  PREFIXD_WEBUI_API_KEY="$api_key" PREFIXD_WEBUI_TENANTS_URL="http://127.0.0.1:$tenants_port" \
  PREFIXD_WEBUI_ADMIN_KEY="$admin_key" PREFIXD_WEBUI_ACME_KEY="$acme_key" \
  PREFIXD_WEBUI_GLOBEX_KEY="$globex_key" PREFIXD_WEBUI_GPU_URL="$gpu_url" PREFIXD_TEST_ARTIFACTS="$artifacts" \
  node --test --test-reporter=spec webui.test.mjs
