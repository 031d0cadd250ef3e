#!/usr/bin/env bash
# make fuzz: runs every fuzz target of a fuzz build (PREFIXD_FUZZ=ON) for FUZZ_SECONDS (default 60)
# on a fresh copy of its seed corpus (fuzz/corpus/<target>/), one after the other, and prints what
# each did: executions, executions per second, coverage at start and at the end, corpus growth.
# Fails when any target crashes, hangs, runs out of memory or a sanitizer reports anything; the
# input that did it is kept under BUILD/fuzz-run/<target>/crashes/ (replay it with
# `BUILD/bin/fuzz_<target> FILE`).
# usage: fuzz/run.sh [BUILD_DIR]   (run inside the build environment: scripts/in-env)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
targets=(request_parser chat_template disk_record artifact json_schema image_input kv_event_batch)
declare -A dict=([request_parser]=json.dict [chat_template]=json.dict [json_schema]=json.dict)
# Stack traces with file and line: llvm-symbolizer where there is one, else binutils' addr2line.
symbolizer=$(command -v llvm-symbolizer || ls /usr/lib/llvm-*/bin/llvm-symbolizer 2>/dev/null | tail -n 1 ||
             command -v addr2line || true)
asan_options=${ASAN_OPTIONS:-detect_leaks=1${symbolizer:+:external_symbolizer_path=$symbolizer}}
ubsan_options=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1${symbolizer:+:external_symbolizer_path=$symbolizer}}

failed=()
summary=()
for target in "${targets[@]}"; do
  binary=$build/bin/fuzz_$target
  work=$build/fuzz-run/$target
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/crashes"
  cp "$here/corpus/$target/"* "$work/corpus/"
  seeds=$(ls "$work/corpus" | wc -l)
  args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=30 -rss_limit_mb=2048
        -artifact_prefix="$work/crashes/")
  [ -n "${dict[$target]:-}" ] && args+=(-dict="$here/${dict[$target]}")
  echo "fuzz: $target for ${seconds}s on $seeds seeds ..."
  status=0
  ASAN_OPTIONS=$asan_options UBSAN_OPTIONS=$ubsan_options "$binary" "${args[@]}" "$work/corpus" > "$work/log" 2>&1 || status=$?
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$work/log" | tail -1)
  cov_start=$(grep -m1 -E 'INITED cov: [0-9]+' "$work/log" | sed -E 's/.*INITED cov: ([0-9]+).*/\1/' || true)
  cov_end=$(grep -E '(#[0-9]+).*cov: [0-9]+' "$work/log" | tail -1 | sed -E 's/.*cov: ([0-9]+).*/\1/' || true)
  corpus=$(ls "$work/corpus" | wc -l)
  line=$(printf '%-15s %10s executions in %ss (%s/s), coverage %s -> %s edges, corpus %s -> %s inputs' \
    "$target" "${execs:-?}" "$seconds" "$(( ${execs:-0} / (seconds > 0 ? seconds : 1) ))" \
    "${cov_start:-?}" "${cov_end:-?}" "$seeds" "$corpus")
  if [ "$status" -ne 0 ]; then
    line="$line  FAILED (exit $status)"
    failed+=("$target")
    echo "---- $target: the end of its log ($work/log):"
    tail -n 60 "$work/log"
    echo "---- kept inputs: $(ls "$work/crashes" | sed "s|^|$work/crashes/|" | tr '\n' ' ')"
  fi
  summary+=("$line")
done

echo
echo "fuzz summary (FUZZ_SECONDS=$seconds per target):"
printf '  %s\n' "${summary[@]}"
if [ "${#failed[@]}" -ne 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: no crash, no sanitizer report"
