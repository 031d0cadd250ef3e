#!/usr/bin/env python3
"""Several models behind one address, prefixd (`serve --models-dir`) beside llama-server's router
mode (`llama-server --models-dir`), on the same folder of two models of the same shape (the
default model and a copy with other weights), each server with its own defaults but the threads,
started A B B A (--rounds 2). Every request is greedy, a fresh 32-token prompt of random ids and 16
tokens out, through /v1/completions with the model's name:

- first request: to a model not loaded yet (the load, then the answer), wall time;
- loaded: to a loaded model, wall time;
- switch: with at most one model loaded (--models-max 1 on both), requests alternating between
  the two models, so that each one unloads the other and loads its own, wall time.

Each measure is the median of --reps requests; the table gives the median (min-max) over rounds.

usage (inside the build environment, after `make build` and `make model`):
  scripts/in-env python3 bench/models_side_by_side.py [--model models/default.gguf --preset qwen2-0.5b]
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile

from bench_server import Server, free_port, full_completion, median_spread, random_ids, run_rounds



def timed_completion(port, rng, model):
    body = {"model": model, "prompt": random_ids(rng, 32), "max_tokens": 16, "temperature": 0, "ignore_eos": True,
            "cache_prompt": False}
    return 1000 * full_completion(port, body)[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefixd", default="build/bin/prefixd")
    parser.add_argument("--mkmodel", default="build/bin/prefixd-mkmodel")
    parser.add_argument("--llama-server", default="llama-server")
    parser.add_argument("--model", default="models/default.gguf")
    parser.add_argument("--preset", default="qwen2-0.5b", help="the model's preset, for the second model")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="models-bench-")
    os.symlink(os.path.abspath(args.model), os.path.join(folder, "first.gguf"))
    subprocess.run([args.mkmodel, "--preset", args.preset, "--seed", "7", "--out", os.path.join(folder, "second.gguf"),
                    "--quiet"], check=True)

    def start(name, port, log, limit):
        if name == "prefixd":
            argv = [args.prefixd, "serve", "--models-dir", folder, "--models-max", str(limit), "--host", "127.0.0.1",
                    "--port", str(port), "--threads", args.threads, "--ctx-size", "2048",
                    "--model-fingerprint-cache", os.path.join(folder, "fingerprints.tsv"), "--no-cache-disk"]
        else:
            argv = [args.llama_server, "--models-dir", folder, "--models-max", str(limit), "--host", "127.0.0.1",
                    "--port", str(port), "-t", args.threads, "-c", "2048", "--no-webui"]
        return Server(argv, port, log)

    def run_one(name, round_index, logs, results):
        rng = random.Random(round_index)
        measured = {}
        port = free_port()
        server = start(name, port, os.path.join(logs, f"{name}-{round_index}.log"), 2)
        try:
            measured["first"] = timed_completion(port, rng, "first")
            measured["loaded"] = statistics.median(timed_completion(port, rng, "first") for _ in range(args.reps))
        finally:
            server.stop()
        port = free_port()
        server = start(name, port, os.path.join(logs, f"{name}-{round_index}-switch.log"), 1)
        try:
            timed_completion(port, rng, "first")
            times = [timed_completion(port, rng, "second" if i % 2 == 0 else "first") for i in range(args.reps)]
            measured["switch"] = statistics.median(times)
        finally:
            server.stop()
        results.append((name, measured))

    results, elapsed = run_rounds(["prefixd", "llama-server"], args.rounds, run_one, "models")
    print(f"{os.path.basename(args.model)} and a copy with other weights, {args.threads} threads, {args.rounds} rounds "
          f"A B B A, {elapsed / 60:.0f} min; wall milliseconds per request of 32 tokens in, 16 out (lower is better).\n")
    print("| request | prefixd | llama-server | prefixd ÷ llama-server |")
    print("| --- | --- | --- | --- |")
    labels = {"first": "first request to an unloaded model", "loaded": "to a loaded model",
              "switch": "alternating models, one loaded at a time (each request a switch)"}
    for key, label in labels.items():
        p = [m[key] for n, m in results if n == "prefixd"]
        q = [m[key] for n, m in results if n == "llama-server"]
        print(f"| {label} | {median_spread(p, '{:.0f}')} | {median_spread(q, '{:.0f}')} | {statistics.median(p) / statistics.median(q):.2f}× |")


if __name__ == "__main__":
    sys.exit(main())
