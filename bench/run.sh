#!/usr/bin/env bash
# `make bench`: prefixd vs llama-server on the default model, one server at a time, same model,
# context, slots, threads and host cache budget. Writes bench/results/<date>-<machine>.{json,md},
# the PNG plots next to them, and the report into docs/benchmarks.md.
#
# Knobs (environment): BENCH_SCALE (multiplies every token length; 1 fits 45 minutes on two
# cores, 4 gives the 1k–8k resend ladder), BENCH_WORKLOADS (comma list, default all),
# BENCH_CACHE_MIB (host cache budget of both servers, default 8192 = llama-server's default),
# BENCH_THREADS (default: every CPU), BENCH_REPS, BENCH_NAME (file stem), BENCH_LLAMA_ARGS,
# BENCH_PREFIXD_ARGS, MODEL (default models/default.gguf), BENCH_PREFIXD (the prefixd binary).
# Extra arguments go to `prefixd compare` as they are.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

prefixd=${BENCH_PREFIXD:-build/bin/prefixd}
model=${MODEL:-models/default.gguf}
[ -x "$prefixd" ] || { echo "bench/run.sh: $prefixd is not built (make build)" >&2; exit 2; }
[ -f "$model" ] || { echo "bench/run.sh: no model at $model (make model)" >&2; exit 2; }

args=(compare --model "$model" --scale "${BENCH_SCALE:-1}" --out bench/results --docs docs/benchmarks.md)
[ -n "${BENCH_WORKLOADS:-}" ] && args+=(--workloads "$BENCH_WORKLOADS")
[ -n "${BENCH_CACHE_MIB:-}" ] && args+=(--cache-mib "$BENCH_CACHE_MIB")
[ -n "${BENCH_THREADS:-}" ] && args+=(--threads "$BENCH_THREADS")
[ -n "${BENCH_REPS:-}" ] && args+=(--reps "$BENCH_REPS")
[ -n "${BENCH_NAME:-}" ] && args+=(--name "$BENCH_NAME")
[ -n "${BENCH_LLAMA_ARGS:-}" ] && args+=(--llama-args "$BENCH_LLAMA_ARGS")
[ -n "${BENCH_PREFIXD_ARGS:-}" ] && args+=(--prefixd-args "$BENCH_PREFIXD_ARGS")

start=$(date +%s)
echo "bench/run.sh: $prefixd ${args[*]} $*" >&2
rc=0
"$prefixd" "${args[@]}" "$@" || rc=$?
echo "bench/run.sh: finished in $(( ($(date +%s) - start + 59) / 60 )) min (exit $rc)" >&2
exit "$rc"
