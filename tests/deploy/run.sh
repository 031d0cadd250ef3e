#!/usr/bin/env bash
# Checks the deployment files without a cluster or a container engine (neither runs here):
# validate.mjs checks every manifest of deploy/kubernetes against the Kubernetes and Gateway API
# schemas and the references between them; the prefixd pods' arguments must parse (`prefixd config
# print`, the model path swapped for the test model), and the metric names the endpoint picker is
# told to read must be on a real server's /metrics. dockerfilelint lints the Containerfile.
# Usage: run.sh PATH_TO_PREFIXD PATH_TO_TINY_MODEL
# Installs the locked packages into tests/deploy/node_modules on first use (needs the npm registry).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 PATH_TO_PREFIXD PATH_TO_TINY_MODEL" >&2
  exit 2
fi
prefixd=$(realpath "$1")
model=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
if [ ! -f node_modules/kubernetes-models/package.json ] || [ ! -f node_modules/dockerfilelint/package.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
node_modules/.bin/dockerfilelint "$here/../../Containerfile"

report=$(node validate.mjs "$here/../../deploy/kubernetes")
echo "manifests valid: $report"
mapfile -t args < <(node -e 'for (const a of JSON.parse(process.argv[1]).prefixd_args.slice(1)) console.log(a)' "$report")
mapfile -t metrics < <(node -e 'for (const m of JSON.parse(process.argv[1]).metrics) console.log(m)' "$report")
served=()
for a in "${args[@]}"; do
  case "$a" in --model=*) served+=("--model=$model") ;; *) served+=("$a") ;; esac
done
# The pods' flags as `prefixd serve` parses them: an unknown flag or a bad value fails here.
env $(env | sed -n 's/^\(PREFIXD_[A-Z_]*\)=.*/-u \1/p') "$prefixd" config print "${served[@]}" > /dev/null

port=$(node "$here/../support/free-port.cjs")
events=$(node "$here/../support/free-port.cjs")
log=$(mktemp /tmp/prefixd-deploy-test-XXXXXX)
env $(env | sed -n 's/^\(PREFIXD_[A-Z_]*\)=.*/-u \1/p') \
  "$prefixd" serve --model "$model" --host 127.0.0.1 --port "$port" --ctx-size 2048 --threads 1 \
  --model-fingerprint-cache off --no-cache-disk --kv-events-endpoint "tcp://127.0.0.1:$events" >"$log" 2>&1 &
pid=$!
. "$here/../support/await-prefixd.sh"
page=$(node -e "fetch('http://127.0.0.1:$port/metrics').then(r => r.text()).then(t => process.stdout.write(t))")
for m in "${metrics[@]}"; do
  if ! grep -q "^$m[ {]" <<<"$page"; then
    echo "the endpoint picker reads $m, which prefixd's /metrics lacks" >&2
    exit 1
  fi
done
echo "ok: ${#args[@]} prefixd flags parse; the picker's ${#metrics[@]} metrics are served"
