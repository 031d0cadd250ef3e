# Sourced by the npm test scripts (tests/node/run.sh, tests/agent/run.sh) after they start
# `prefixd serve` in the background with its process id in $pid and its output in $log: stops it
# when the script exits (printing its log if the script failed) and waits until GET /health answers
# on $port, failing after 60 s or when the server exits first.
cleanup() {
  status=$?
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ "$status" -ne 0 ]; then
    echo "--- prefixd log ---" >&2
    cat "$log" >&2
  fi
  rm -f "$log"
  exit "$status"
}
trap cleanup EXIT

healthy=0
for _ in $(seq 1 600); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "prefixd exited during startup" >&2
    exit 1
  fi
  if node -e "fetch('http://127.0.0.1:$port/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"; then
    healthy=1
    break
  fi
  sleep 0.1
done
if [ "$healthy" -ne 1 ]; then
  echo "prefixd did not answer /health within 60 s" >&2
  exit 1
fi
