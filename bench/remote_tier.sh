#!/usr/bin/env bash
# The shared tier, measured: two prefixd servers (A, B) on one Valkey. For each repetition a fresh
# long prompt is computed on A; B then answers it once from the shared tier and once, for a second
# fresh prompt of the same length, cold — in alternating order (A B B A across repetitions).
# Prints per repetition B's time to the first (only) token and the cached tokens of each, then the
# cold ÷ remote ratios. Run inside the build environment: scripts/in-env bench/remote_tier.sh
# Environment: MODEL (build/models/tiny.gguf), SENTENCES (prompt length, 400), REPS (6), BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin/prefixd}
MODEL=${MODEL:-build/models/tiny.gguf}
SENTENCES=${SENTENCES:-400}
REPS=${REPS:-6}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
VK=$(port); PA=$(port); PB=$(port)
WORK=$(mktemp -d)
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
PIDS=()
trap cleanup EXIT
valkey-server --port "$VK" --bind 127.0.0.1 --save '' --appendonly no --loglevel warning > "$WORK/vk.log" 2>&1 &
PIDS+=($!)
for p in "$PA" "$PB"; do
  "$BIN" serve --model "$MODEL" --port "$p" --ctx-size 16384 --parallel 2 --no-cache-disk --cache-remote "redis://127.0.0.1:$VK" \
    > "$WORK/$p.log" 2>&1 &
  PIDS+=($!)
done
for p in "$PA" "$PB"; do
  for _ in $(seq 1 300); do curl -sf "localhost:$p/health" > /dev/null && break; sleep 0.2; done
done
body() {
  python3 - "$1" "$SENTENCES" <<'EOF'
import json, sys
tag, n = sys.argv[1], int(sys.argv[2])
text = " ".join(f"Entry {i} of ledger {tag}: the balance carries to the next page." for i in range(n))
print(json.dumps({"messages": [{"role": "user", "content": text}], "max_tokens": 1, "temperature": 0}))
EOF
}
# Seconds for the whole (one-token) reply, and its cached tokens.
ask() {
  body "$2" > "$WORK/req.json"
  curl -s -o "$WORK/reply.json" -w '%{time_total}' "localhost:$1/v1/chat/completions" -d @"$WORK/req.json"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); u=d["usage"]; print("", u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], (d.get("prompt_cache") or {}).get("tier"))' "$WORK/reply.json"
}
settle() {  # until A's write-behind queue is empty
  for _ in $(seq 1 200); do
    q=$(curl -s "localhost:$PA/v1/cache/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tiers"]["remote"]["queue_bytes"])')
    [ "$q" = 0 ] && return; sleep 0.05
  done
}
echo "rep order remote_s remote_prompt remote_cached remote_tier cold_s cold_prompt cold_cached"
for r in $(seq 1 "$REPS"); do
  ask "$PA" "shared-$r" > /dev/null
  settle
  if (( r % 2 )); then
    remote=$(ask "$PB" "shared-$r"); cold=$(ask "$PB" "cold-$r"); order="remote,cold"
  else
    cold=$(ask "$PB" "cold-$r"); remote=$(ask "$PB" "shared-$r"); order="cold,remote"
  fi
  echo "$r $order $remote $cold"
done | tee "$WORK/rows.txt"
python3 - "$WORK/rows.txt" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
ratios = sorted(float(r[6]) / float(r[2]) for r in rows)
print(f"cold / remote time to first token: median {statistics.median(ratios):.1f}x, range {ratios[0]:.1f}-{ratios[-1]:.1f}x over {len(rows)} pairs")
EOF
curl -s "localhost:$PB/v1/cache/stats" | python3 -c 'import json,sys; r=json.load(sys.stdin)["tiers"]["remote"]; print("B shared tier:", json.dumps({k: r[k] for k in ("hits","lookups","lookup_hits","lookup_timeouts","lookup_seconds_mean","read_bytes","bad_values")}))'
