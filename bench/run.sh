#!/usr/bin/env bash
# `make bench`: prefixd vs llama-server, one server at a time, same model, context, slots, threads
# and host cache budget, in parts:
# - default: the default model on the default workloads. Writes bench/results/<date>-<machine>.{json.zst,md},
#   the PNG plots next to them, and the report into docs/benchmarks.md.
# - families: the conversation traces on the tiny hybrid, sliding-window and recurrent models,
#   which both servers reuse at checkpoints (generated into models/ when missing), with the token
#   gate. Writes bench/results/<stem>-<preset>.{json.zst,md} and one section per model of
#   docs/benchmarks-families.md. `make bench-families` runs this part alone.
#
# Knobs (environment): BENCH_SCALE (multiplies every token length; 1 takes about 50 minutes on two
# cores, 4 gives the 1k–8k resend ladder), BENCH_WORKLOADS (comma list, default all),
# BENCH_CACHE_MIB (host cache budget of both servers, default 8192 = llama-server's default),
# BENCH_THREADS (default: every CPU), BENCH_REPS, BENCH_NAME (file stem), BENCH_LLAMA_ARGS,
# BENCH_PREFIXD_ARGS, BENCH_OUT (the results folder, default bench/results), BENCH_DOCS (the page
# the default part's report goes into, default docs/benchmarks.md; empty: none), BENCH_DISK_DIR
# (where the restart workload's disk-tier directory goes, default TMPDIR or /tmp), MODEL (default
# models/default.gguf), BENCH_PREFIXD (the prefixd binary the
# benchmark serves with, default build/bin/prefixd), BENCH_PREFIXD_BENCH and BENCH_PREFIXD_MKMODEL
# (the benchmark client and the model generator, default prefixd-bench and prefixd-mkmodel in the
# folder of BENCH_PREFIXD), BENCH_PARTS (default "decode,default,traces,families,speculative"), BENCH_FAMILIES (model presets,
# default qwen35-tiny,gemma3-tiny,mamba2-tiny), BENCH_FAMILY_WORKLOADS (default
# chat,agent,edit,multisession), BENCH_FAMILY_REPS (rounds of chat, agent and edit there, default
# 3), BENCH_SNAPSHOT_MIB (the part of the host budget prefixd's checkpoints get there, default
# 1024).
# - decode: bench/decode.py, generated tokens beside llama-server: decode tokens/s by context length
#   (16, 2k, 8k) and with four sequences at once, a hit adding 20 tokens to a cached 2,000-token
#   prompt (1 and 16 tokens out), a long-output agent turn, then decode at 16 and 2k tokens on the
#   family tiny presets (BENCH_DECODE_FAMILIES, default tiny,qwen35-tiny,gemma3-tiny,mamba2-tiny);
#   BENCH_DECODE_ROUNDS (default 2: A B, B A). Its gate fails `make bench` when prefixd decodes
#   slower than 0.95x llama-server on the default model (about 20 minutes on two cores). Writes
#   bench/results/<stem>-decode.{md,json} and its section of docs/benchmarks.md (BENCH_DOCS).
# - speculative: bench/speculative.py, decode speed with and without n-gram drafts on prefixd and
#   llama-server (the default model; about 8 minutes on two cores). Writes
#   bench/results/<stem>-speculative.{md,json} and its section of docs/benchmarks.md (BENCH_DOCS);
#   then bench/draft_model.py, the same with a draft model (a generated target/drafter pair, about
#   10 minutes), into bench/results/<stem>-draft-model.{md,json}.
# - traces: public traces replayed A B B A on the default model. `codeagent`: 48 coding agents at
#   once with the token shapes of SWE-bench trajectories, under memory pressure (their histories
#   outgrow the context, and the host cache budget of both servers is BENCH_CODEAGENT_CACHE_MIB,
#   default 256); `mooncake`: the first 187 requests of the Mooncake conversation trace;
#   `codecomplete`: an editor's /infill requests (llama.vscode's pattern), with llama-server and a
#   second prefixd target both at --cache-reuse 256 beside prefixd's default. Writes
#   bench/results/<stem>-codeagent.*, <stem>-mooncake.* and <stem>-codecomplete.*, and their sections
#   of docs/benchmarks.md (BENCH_DOCS).
# Extra arguments go to every `prefixd-bench compare` run as they are.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

prefixd=${BENCH_PREFIXD:-build/bin/prefixd}
bench=${BENCH_PREFIXD_BENCH:-$(dirname "$prefixd")/prefixd-bench}
mkmodel=${BENCH_PREFIXD_MKMODEL:-$(dirname "$prefixd")/prefixd-mkmodel}
parts=",${BENCH_PARTS:-decode,default,traces,families,speculative},"
for program in "$prefixd" "$bench" "$mkmodel"; do
  [ -x "$program" ] || { echo "bench/run.sh: $program is not built (make build)" >&2; exit 2; }
done

# What both parts pass the same way; the server is named as an absolute path, which the results
# record so that a run can be repeated by hand.
common=(--scale "${BENCH_SCALE:-1}" --out "${BENCH_OUT:-bench/results}" --prefixd-bin "$(realpath "$prefixd")")
[ -n "${BENCH_THREADS:-}" ] && common+=(--threads "$BENCH_THREADS")
[ -n "${BENCH_PREFIXD_ARGS:-}" ] && common+=(--prefixd-args "$BENCH_PREFIXD_ARGS")
[ -n "${BENCH_DISK_DIR:-}" ] && common+=(--disk-dir "$BENCH_DISK_DIR")
# The host cache budget, apart: the coding-agent trace sets its own.
budget=()
[ -n "${BENCH_CACHE_MIB:-}" ] && budget=(--cache-mib "$BENCH_CACHE_MIB")

start=$(date +%s)
rc=0
run() {
  echo "bench/run.sh: $bench $*" >&2
  "$bench" "$@" || rc=$?
}

if [[ $parts == *,decode,* ]]; then
  stem=${BENCH_NAME:-$(date -u +%F)-$(uname -n | tr -c 'A-Za-z0-9._\n-' '-')}
  out=${BENCH_OUT:-bench/results}
  mkdir -p "$out" models
  families=()
  IFS=, read -r -a presets <<< "${BENCH_DECODE_FAMILIES-tiny,qwen35-tiny,gemma3-tiny,mamba2-tiny}"
  for preset in "${presets[@]}"; do
    [ -f "models/$preset.gguf" ] || "$mkmodel" --preset "$preset" --out "models/$preset.gguf" --quiet
    families+=("models/$preset.gguf")
  done
  args=(--prefixd "$prefixd" --model "${MODEL:-models/default.gguf}" --rounds "${BENCH_DECODE_ROUNDS:-2}"
        --out "$out/$stem-decode.md" --json "$out/$stem-decode.json")
  [ ${#families[@]} -gt 0 ] && args+=(--families "$(IFS=,; echo "${families[*]}")")
  [ -n "${BENCH_THREADS:-}" ] && args+=(--threads "$BENCH_THREADS")
  docs=${BENCH_DOCS-docs/benchmarks.md}
  [ -n "$docs" ] && args+=(--docs "$docs")
  echo "bench/run.sh: bench/decode.py ${args[*]}" >&2
  python3 bench/decode.py "${args[@]}" || rc=$?
fi

if [[ $parts == *,default,* ]]; then
  model=${MODEL:-models/default.gguf}
  [ -f "$model" ] || { echo "bench/run.sh: no model at $model (make model)" >&2; exit 2; }
  args=(compare --model "$model" "${common[@]}" "${budget[@]}")
  docs=${BENCH_DOCS-docs/benchmarks.md}
  [ -n "$docs" ] && args+=(--docs "$docs")
  [ -n "${BENCH_WORKLOADS:-}" ] && args+=(--workloads "$BENCH_WORKLOADS")
  [ -n "${BENCH_NAME:-}" ] && args+=(--name "$BENCH_NAME")
  [ -n "${BENCH_REPS:-}" ] && args+=(--reps "$BENCH_REPS")
  [ -n "${BENCH_LLAMA_ARGS:-}" ] && args+=(--llama-args "$BENCH_LLAMA_ARGS")
  run "${args[@]}" "$@"
fi

if [[ $parts == *,traces,* ]]; then
  stem=${BENCH_NAME:-$(date -u +%F)-$(uname -n | tr -c 'A-Za-z0-9._\n-' '-')}
  model=${MODEL:-models/default.gguf}
  [ -f "$model" ] || { echo "bench/run.sh: no model at $model (make model)" >&2; exit 2; }
  docs=${BENCH_DOCS-docs/benchmarks.md}
  for workload in codeagent mooncake codecomplete; do
    own_budget=("${budget[@]}")
    [ "$workload" = codeagent ] && own_budget=(--cache-mib "${BENCH_CODEAGENT_CACHE_MIB:-256}")
    args=(compare --model "$model" "${common[@]}" "${own_budget[@]}" --workloads "$workload" --interleave 2
          --name "$stem-$workload")
    [ -n "$docs" ] && args+=(--docs "$docs" --docs-section "$workload")
    llama_args=${BENCH_LLAMA_ARGS:-}
    if [ "$workload" = codecomplete ]; then
      # The editors' guides run llama-server with --cache-reuse 256; prefixd runs with and without it.
      llama_args="--cache-reuse 256${llama_args:+ $llama_args}"
      args+=(--targets prefixd,prefixd-reuse,llama-server --variant "prefixd-reuse=--cache-reuse 256")
    fi
    [ -n "$llama_args" ] && args+=(--llama-args "$llama_args")
    run "${args[@]}" "$@"
  done
fi

if [[ $parts == *,families,* ]]; then
  stem=${BENCH_NAME:-$(date -u +%F)-$(uname -n | tr -c 'A-Za-z0-9._\n-' '-')}
  IFS=, read -r -a presets <<< "${BENCH_FAMILIES:-qwen35-tiny,gemma3-tiny,mamba2-tiny}"
  for preset in "${presets[@]}"; do
    model=models/$preset.gguf
    if [ ! -f "$model" ]; then
      mkdir -p models
      "$mkmodel" --preset "$preset" --out "$model" --quiet
    fi
    args=(compare --model "$model" "${common[@]}" "${budget[@]}" --docs docs/benchmarks-families.md --docs-section "$preset"
          --name "$stem-$preset" --workloads "${BENCH_FAMILY_WORKLOADS:-chat,agent,edit,multisession}"
          --reps "${BENCH_FAMILY_REPS:-3}" --snapshot-mib "${BENCH_SNAPSHOT_MIB:-1024}" --token-gate --no-plots
          --llama-args "-lv 4${BENCH_LLAMA_ARGS:+ $BENCH_LLAMA_ARGS}")
    # -lv 4: llama-server logs its context checkpoints only at verbosity 4; the report reads them.
    # llama-server keeps only the window of a sliding-window model; prefixd keeps every cell when
    # they fit, so it also runs the way llama-server does (window only, reuse at checkpoints), and
    # that is the one compared first.
    case $preset in
      gemma3-*) args+=(--variant "prefixd-swa-off=--swa-full off" --targets prefixd-swa-off,llama-server,prefixd) ;;
    esac
    run "${args[@]}" "$@"
  done
fi

if [[ $parts == *,speculative,* ]]; then
  stem=${BENCH_NAME:-$(date -u +%F)-$(uname -n | tr -c 'A-Za-z0-9._\n-' '-')}
  out=${BENCH_OUT:-bench/results}
  mkdir -p "$out"
  args=(--prefixd "$prefixd" --model "${MODEL:-models/default.gguf}" --out "$out/$stem-speculative.md"
        --json "$out/$stem-speculative.json")
  [ -n "${BENCH_THREADS:-}" ] && args+=(--threads "$BENCH_THREADS")
  docs=${BENCH_DOCS-docs/benchmarks.md}
  [ -n "$docs" ] && args+=(--docs "$docs")
  echo "bench/run.sh: bench/speculative.py ${args[*]}" >&2
  python3 bench/speculative.py "${args[@]}" || rc=$?
  # The draft model: a target/drafter pair generated from the default preset (drafts right by
  # construction, and a drafter of another seed whose drafts are wrong).
  args=(--prefixd "$prefixd" --mkmodel "$mkmodel" --out "$out/$stem-draft-model.md" --json "$out/$stem-draft-model.json")
  [ -n "${BENCH_THREADS:-}" ] && args+=(--threads "$BENCH_THREADS")
  echo "bench/run.sh: bench/draft_model.py ${args[*]}" >&2
  python3 bench/draft_model.py "${args[@]}" || rc=$?
fi

echo "bench/run.sh: finished in $(( ($(date +%s) - start + 59) / 60 )) min (exit $rc)" >&2
exit "$rc"
