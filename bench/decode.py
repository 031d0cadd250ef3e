#!/usr/bin/env python3
"""Generated tokens, side by side: decode speed by context length and by sequences generating at
once, the cost of a cache hit with a short suffix, and a long-output agent turn, on prefixd and
llama-server, one server at a time on the same model and threads.

Each server runs with its own defaults but for what the workload needs: the model, `--threads`,
the context and the slots. llama-server splits `-c` among its slots, so it gets slots × the context
one request needs; prefixd gets the same total. prefixd keeps its disk tier (on by default) in a
fresh folder that goes with the server. Prompts are random token ids through `/v1/completions`
(the same ids on both servers, new ones every round so that no round reuses another's), greedy,
with `ignore_eos` and a fixed reply length. Rounds run the targets A B, then B A, and so on.

Workloads (`--workloads`):
- decode-16, decode-2k, decode-8k: one request at a time with 16, 2,000 and 8,000 tokens of
  context, 64 tokens out; each server's own `timings.predicted_per_second`.
- decode-4x16, decode-4x2k: four requests generating at once (`--parallel 4` / `-np 4`), their
  prompts first sent once with one token out so that the four decode together; per-request decode
  tokens/s as each server reports it, and the burst's generated tokens over its wall time.
- hit-1, hit-16: a 2,000-token prompt sent once, then 12 sends that each add 20 new tokens to it,
  1 and 16 tokens out: the wall time of each send (what a client waits for).
- agent-turn: a 3,000-token history sent once with one token out, then the next turn (the history
  and 100 new tokens) with 256 tokens out: its wall time and decode tokens/s.

The gate: prefixd's median decode tokens/s on every decode-* workload of the first model is at
least `--gate` (0.95) times llama-server's; otherwise the script exits 1. `--families` adds the
decode-16 and decode-2k rows for more models (the family tiny presets), without the gate.

Writes a Markdown report (--out), every measurement (--json) and its section of a docs page
(--docs), and prints the report.
"""
import argparse
import concurrent.futures
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_server import (Server, add_report_arguments, free_port, full_completion, put_into_docs, random_ids, run_rounds,
                          write_outputs)

REPLY = 64
HIT_SENDS = 12
# Token ids every generated vocabulary has (the tiny presets have 4,096), above the special ones.
ID_LOW, ID_HIGH = 300, 3900

SINGLE = {"decode-16": 16, "decode-2k": 2000, "decode-8k": 8000}
PARALLEL = {"decode-4x16": 16, "decode-4x2k": 2000}
HITS = {"hit-1": 1, "hit-16": 16}
ALL = [*SINGLE, *PARALLEL, *HITS, "agent-turn"]
TARGETS = ["prefixd", "llama-server"]


def ids(rng, n):
    return random_ids(rng, n, ID_LOW, ID_HIGH)


def completion(port, prompt, max_tokens):
    return full_completion(port, {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                                  "cache_prompt": True})


def server_argv(target, args, model, port, ctx_per_slot, slots, disk_dir):
    common = ["--model", model, "--port", str(port), "--threads", str(args.threads)]
    total = ctx_per_slot * slots
    if target == "prefixd":
        return [args.prefixd, "serve", *common, "--ctx-size", str(total), "--parallel", str(slots),
                "--cache-disk-path", disk_dir, *args.prefixd_args.split()]
    return [args.llama_server, *common, "-c", str(total), "-np", str(slots), "--host", "127.0.0.1", "--no-webui",
            *args.llama_args.split()]


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def with_server(target, args, model, ctx_per_slot, slots, log_path, work, results, round_index):
    port = free_port()
    disk_dir = tempfile.mkdtemp(prefix="prefixd-decode-bench-disk-")
    server = Server(server_argv(target, args, model, port, ctx_per_slot, slots, disk_dir), port, log_path)
    try:
        work(port)
        record(results, target, model, f"server, {slots} slot{'s' if slots > 1 else ''}", round_index,
               rss_mib=peak_rss_mib(server.process.pid))
    finally:
        server.stop()
        shutil.rmtree(disk_dir, ignore_errors=True)


def record(results, target, model, workload, round_index, **values):
    results.append({"target": target, "model": os.path.basename(model), "workload": workload, "round": round_index,
                    **values})


def run_single(port, target, model, workloads, rng, round_index, results):
    for workload, context in SINGLE.items():
        if workload not in workloads:
            continue
        for _ in range(3 if context < 1000 else 2 if context < 4000 else 1):
            reply, wall = completion(port, ids(rng, context), REPLY)
            timings = reply["timings"]
            record(results, target, model, workload, round_index, decode_tps=timings["predicted_per_second"],
                   wall_s=wall, **({"prompt_tps": timings["prompt_per_second"]} if context >= 1000 else {}))


def run_hits(port, target, model, workloads, rng, round_index, results):
    for workload, out in HITS.items():
        if workload not in workloads:
            continue
        base = ids(rng, 2000)
        completion(port, base, 1)
        for _ in range(HIT_SENDS):
            _, wall = completion(port, base + ids(rng, 20), out)
            record(results, target, model, workload, round_index, wall_s=wall)


def run_agent_turn(port, target, model, workloads, rng, round_index, results):
    if "agent-turn" not in workloads:
        return
    history = ids(rng, 3000)
    completion(port, history, 1)
    reply, wall = completion(port, history + ids(rng, 100), 256)
    record(results, target, model, "agent-turn", round_index, wall_s=wall,
           decode_tps=reply["timings"]["predicted_per_second"])


def run_parallel(port, target, model, workloads, rng, round_index, results):
    for workload, context in PARALLEL.items():
        if workload not in workloads:
            continue
        prompts = [ids(rng, context) for _ in range(4)]
        for p in prompts:
            completion(port, p, 1)  # cached on both servers: the burst below is almost all decode
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(lambda p: completion(port, p, REPLY)[0], prompts))
        wall = time.perf_counter() - start
        for reply in replies:
            record(results, target, model, workload, round_index, decode_tps=reply["timings"]["predicted_per_second"])
        record(results, target, model, workload + " (burst)", round_index, burst_tps=4 * REPLY / wall, wall_s=wall)


def run_target(target, args, round_index, logs, results):
    for m, model in enumerate(args.models):
        workloads = args.workloads if m == 0 else [w for w in args.workloads if w in ("decode-16", "decode-2k")]
        rng = random.Random(f"{round_index}-{os.path.basename(model)}")
        stem = f"{target}-{os.path.basename(model)}-{round_index + 1}"
        one = [w for w in workloads if w in SINGLE or w in HITS or w == "agent-turn"]
        if one:
            longest = max([SINGLE[w] for w in one if w in SINGLE] + [3100])
            with_server(target, args, model, longest + 512, 1, os.path.join(logs, stem + "-1.log"),
                        lambda port: (run_single(port, target, model, one, rng, round_index, results),
                                      run_hits(port, target, model, one, rng, round_index, results),
                                      run_agent_turn(port, target, model, one, rng, round_index, results)),
                        results, round_index)
        several = [w for w in workloads if w in PARALLEL]
        if several:
            with_server(target, args, model, 4096, 4, os.path.join(logs, stem + "-4.log"),
                        lambda port: run_parallel(port, target, model, several, rng, round_index, results),
                        results, round_index)


def spread(values, fmt):
    return f"{fmt.format(min(values))}–{fmt.format(max(values))}"


def report(results, args, elapsed):
    lines = [f"Threads {args.threads}, {args.rounds} rounds ordered A B, B A … over the servers, {elapsed / 60:.0f} min; "
             f"llama-server {args.llama_version}. Decode: median of each server's own `timings.predicted_per_second` "
             f"over every request, and the range; hits and the agent turn: the client's wall time per request, "
             f"median and range; prefill: each server's `timings.prompt_per_second` of the cold 2,000- and "
             f"8,000-token prompts; peak RSS: VmHWM of each server process at the end of its run (a run of the "
             f"single-request workloads, and one of the four-request ones). Ratio: prefixd over llama-server "
             f"(above 1 is better for tokens/s, below 1 is better for wall times and memory).", "",
             "| model | workload | measure | prefixd | range | llama-server | range | ratio |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    gate_failures = []
    for m, model in enumerate(args.models):
        name = os.path.basename(model)
        workloads = args.workloads if m == 0 else [w for w in args.workloads if w in ("decode-16", "decode-2k")]
        for workload in workloads + ["server, 1 slot", "server, 4 slots"]:
            for label, key, unit, fmt, higher in (("decode tok/s", "decode_tps", "", "{:.1f}", True),
                                                  ("burst tok/s", "burst_tps", "", "{:.1f}", True),
                                                  ("prefill tok/s", "prompt_tps", "", "{:.0f}", True),
                                                  ("peak RSS MiB", "rss_mib", "", "{:.0f}", False),
                                                  ("wall ms", "wall_s", "ms", "{:.0f}", False)):
                rows_of = lambda target: [r[key] * (1000 if unit == "ms" else 1) for r in results
                                          if r["target"] == target and r["model"] == name and key in r
                                          and r["workload"] == (workload + " (burst)" if key == "burst_tps" else workload)]
                mine, theirs = rows_of("prefixd"), rows_of("llama-server")
                if not mine or not theirs or (key == "wall_s" and workload.startswith("decode")):
                    continue
                ratio = statistics.median(mine) / statistics.median(theirs)
                lines.append(f"| {name} | {workload} | {label} | {fmt.format(statistics.median(mine))} | "
                             f"{spread(mine, fmt)} | {fmt.format(statistics.median(theirs))} | {spread(theirs, fmt)} | "
                             f"{ratio:.2f}× |")
                if m == 0 and key == "decode_tps" and workload.startswith("decode") and ratio < args.gate:
                    gate_failures.append(f"{workload} {ratio:.2f}×")
    lines.append("")
    verdict = ("PASS" if not gate_failures else "FAIL (" + ", ".join(gate_failures) + ")")
    lines.append(f"Decode gate (prefixd at least {args.gate:.2f}× llama-server on every decode workload of "
                 f"`{os.path.basename(args.models[0])}`): {verdict}.")
    return "\n".join(lines) + "\n", not gate_failures


def llama_version(binary):
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
        text = (out.stdout + out.stderr).strip().splitlines()
        return next((line for line in text if "version" in line), text[0] if text else "unknown")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prefixd", default="build/bin/prefixd")
    p.add_argument("--llama-server", default="llama-server")
    p.add_argument("--model", default="models/default.gguf")
    p.add_argument("--families", default="", help="more models (comma list of GGUF paths): decode-16 and decode-2k")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--workloads", default=",".join(ALL))
    p.add_argument("--rounds", type=int, default=2, help="rounds, alternately in the servers' order and reversed")
    p.add_argument("--gate", type=float, default=0.95)
    p.add_argument("--prefixd-args", default="", help="more prefixd serve arguments (split on spaces)")
    p.add_argument("--llama-args", default="", help="more llama-server arguments (split on spaces)")
    add_report_arguments(p, "decode-report", "measurement")
    args = p.parse_args()
    args.workloads = args.workloads.split(",")
    unknown = [w for w in args.workloads if w not in ALL]
    if unknown:
        p.error(f"unknown workload {unknown[0]!r}; known: {', '.join(ALL)}")
    args.models = [args.model] + [m for m in args.families.split(",") if m]
    for model in args.models:
        if not os.path.isfile(model):
            p.error(f"no model at {model}")
    args.llama_version = llama_version(args.llama_server)
    results, elapsed = run_rounds(TARGETS, args.rounds,
                                  lambda name, r, logs, results: run_target(name, args, r, logs, results), "decode")
    text, passed = report(results, args, elapsed)
    write_outputs(text, results, args.out, args.json)
    if args.docs:
        put_into_docs(args.docs, text, "decode-report", "bench/decode.py", "Decode and hits beside llama-server: the latest run")
    if not passed:
        print("decode gate: FAIL (prefixd decodes slower than llama-server beyond the gate)", file=sys.stderr)
        sys.exit(1)



if __name__ == "__main__":
    main()
