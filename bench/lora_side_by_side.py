#!/usr/bin/env python3
"""LoRA adapters, prefixd beside llama-server on the same model and adapters: what an adapter costs
per generated token, and what requests under different adapters cost when they run at once.

Both servers load the same two adapters (--lora A,B: prefixd-mkmodel writes them for the model's
preset) with their own defaults otherwise (2 threads, 2 slots, the same context per slot), started
A B B A (--rounds 2). Every request is greedy with `ignore_eos`, a fresh 32-token prompt of random
ids and --tokens out, and names its adapters in `lora` (the same field on both servers):

- none: every adapter at scale 0 (the base model on a server that loaded adapters);
- one: adapter A at scale 1;
- two: A and B at scale 1;
- two at once, one adapter: two requests at once, both under A;
- two at once, two adapters: two requests at once, one under A and one under B (a model call
  computes one adapter set on both servers, so they take turns).

Single requests: each server's own `timings.predicted_per_second`. Pairs: the pair's generated
tokens over its wall time. Each measure is the median of --reps requests (or pairs) after one
unmeasured one; the table gives the median (min-max) over rounds, and each server's cost of an
adapter per token (none's tokens/s over one's).

usage (inside the build environment, after `make build` and `make model`):
  scripts/in-env python3 bench/lora_side_by_side.py [--model models/default.gguf --preset qwen2-0.5b]
"""
import argparse
import concurrent.futures
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

from bench_server import Server, free_port, full_completion, median_spread, random_ids, run_rounds

CASES = [
    ("none", [[{"id": 0, "scale": 0.0}]]),
    ("one", [[{"id": 0, "scale": 1.0}]]),
    ("two", [[{"id": 0, "scale": 1.0}, {"id": 1, "scale": 1.0}]]),
    ("pair, one adapter", [[{"id": 0, "scale": 1.0}], [{"id": 0, "scale": 1.0}]]),
    ("pair, two adapters", [[{"id": 0, "scale": 1.0}], [{"id": 1, "scale": 1.0}]]),
]


def generate(port, rng, lora, tokens):
    body = {"prompt": random_ids(rng, 32), "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
            "cache_prompt": False, "lora": lora}
    return full_completion(port, body)[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefixd", default="build/bin/prefixd")
    parser.add_argument("--mkmodel", default="build/bin/prefixd-mkmodel")
    parser.add_argument("--llama-server", default="llama-server")
    parser.add_argument("--model", default="models/default.gguf")
    parser.add_argument("--preset", default="qwen2-0.5b", help="the model's preset, for its adapters")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--threads", default="2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="lora-bench-")
    adapters = []
    for name, seed in (("a", 11), ("b", 12)):
        path = os.path.join(work, f"lora-{name}.gguf")
        subprocess.run([args.mkmodel, "--preset", args.preset, "--lora-rank", str(args.rank), "--seed", str(seed),
                        "--out", path, "--quiet"], check=True)
        adapters.append(path)
    lora_flag = ["--lora", ",".join(adapters)]

    def run_one(name, round_index, logs, results):
        port = free_port()
        if name == "prefixd":
            argv = [args.prefixd, "serve", "--model", args.model, *lora_flag, "--host", "127.0.0.1", "--port",
                    str(port), "--ctx-size", "1024", "--parallel", "2", "--threads", args.threads,
                    "--model-fingerprint-cache", "off", "--no-cache-disk"]
        else:
            argv = [args.llama_server, "-m", args.model, *lora_flag, "--host", "127.0.0.1", "--port", str(port),
                    "-c", "2048", "-np", "2", "-t", args.threads, "--no-webui"]
        server = Server(argv, port, os.path.join(logs, f"{name}-{round_index}.log"))
        rng = random.Random(round_index)
        try:
            measured = {}
            for case, loras in CASES:
                def once():
                    if len(loras) == 1:
                        return generate(port, rng, loras[0], args.tokens)["timings"]["predicted_per_second"]
                    start = time.perf_counter()
                    with concurrent.futures.ThreadPoolExecutor(len(loras)) as pool:
                        list(pool.map(lambda lora: generate(port, rng, lora, args.tokens), loras))
                    return len(loras) * args.tokens / (time.perf_counter() - start)
                once()
                measured[case] = statistics.median(once() for _ in range(args.reps))
            results.append((name, measured))
        finally:
            server.stop()

    results, elapsed = run_rounds(["prefixd", "llama-server"], args.rounds, run_one, "lora")
    print(f"{os.path.basename(args.model)}, two rank-{args.rank} adapters, {args.threads} threads, "
          f"{args.rounds} rounds A B B A, {elapsed / 60:.0f} min; tokens per second (higher is better).\n")
    print("| requests | prefixd | llama-server | prefixd ÷ llama-server |")
    print("| --- | --- | --- | --- |")

    def of(name, case):
        return [m[case] for n, m in results if n == name]
    for case, _ in CASES:
        p, l = of("prefixd", case), of("llama-server", case)
        print(f"| {case} | {median_spread(p)} | {median_spread(l)} | "
              f"{statistics.median(p) / statistics.median(l):.2f}× |")
    cost = {n: [m["none"] / m["one"] for name, m in results if name == n] for n in ("prefixd", "llama-server")}
    print(f"| cost of one adapter per token (none ÷ one) | {median_spread(cost['prefixd'], '{:.2f}')}× | "
          f"{median_spread(cost['llama-server'], '{:.2f}')}× | |")


if __name__ == "__main__":
    sys.exit(main())
