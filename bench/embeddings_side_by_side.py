#!/usr/bin/env python3
"""Embeddings and rerank, prefixd beside llama-server on the same models, each server with its own
defaults (2 threads, the same context), the servers started A B B A (--rounds 2):

- embed batch: one /v1/embeddings request of N distinct inputs (40 to 120 tokens), cache_prompt
  false on prefixd too (llama-server keeps nothing of an input): inputs per second.
- shared prefix: one request of N inputs that share a long prefix (an instruction and a document)
  and differ in their last words, sent twice with other endings each time: inputs per second, and
  the tokens prefixd took from its cache (usage.prompt_tokens_details.cached_tokens).
- rerank: one /v1/rerank request, a query against D documents: milliseconds per request.

Each measure is the median of --reps requests after one unmeasured request; across rounds the
table gives the median (min-max) of the rounds' medians.

usage (inside the build environment, after `make build`; generated models under build/models):
  scripts/in-env python3 bench/embeddings_side_by_side.py [--rounds 2] [--reps 5]
Prints one markdown table (docs/benchmarks.md, "Embeddings and rerank").
"""
import argparse
import os
import statistics
import sys
import time

from bench_server import Server, free_port, median_spread, post, run_rounds

WORDS = ("river mill bridge meadow children summer winter water edges wheel spring thaw stone road town market "
         "evening lamp window garden orchard apples baker bread morning bell tower clock square fountain pigeons").split()


def text(seed, n_words):
    return " ".join(WORDS[(seed * 7 + i * 13 + i * i) % len(WORDS)] for i in range(n_words))


def timed(port, path, body):
    start = time.perf_counter()
    reply = post(port, path, body)
    return time.perf_counter() - start, reply


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefixd", default="build/bin/prefixd")
    parser.add_argument("--llama-server", default="llama-server")
    parser.add_argument("--models", default="build/models")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--documents", type=int, default=16)
    parser.add_argument("--embed-models", default="tiny-embed.gguf,tiny-bert.gguf")
    parser.add_argument("--rerank-models", default="tiny-bert-reranker.gguf,tiny-qwen3-reranker.gguf")
    args = parser.parse_args()

    distinct = [text(i, 30 + (i * 17) % 60) for i in range(args.inputs)]
    prefix = "Instruct: find the passage that answers the question.\nDocument: " + text(999, 150) + "\nQuestion:"
    def shared(rep):
        return [f"{prefix} {text(rep * 1000 + i, 6)}" for i in range(args.inputs)]
    query = "where does the river pass the mill"
    documents = [text(500 + i, 25 + (i * 11) % 40) for i in range(args.documents)]

    rows = []
    jobs = [(m, "embed") for m in args.embed_models.split(",") if m] + \
           [(m, "rerank") for m in args.rerank_models.split(",") if m]
    for model, kind in jobs:
        path = os.path.join(args.models, model)
        flag = "--embeddings" if kind == "embed" else "--reranking"

        def run_one(name, round_index, logs, results):
            port = free_port()
            if name == "prefixd":
                argv = [args.prefixd, "serve", "--model", path, flag, "--host", "127.0.0.1", "--port", str(port),
                        "--ctx-size", "4096", "--threads", args.threads, "--model-fingerprint-cache", "off",
                        "--no-cache-disk"]
            else:
                argv = [args.llama_server, "-m", path, flag, "--host", "127.0.0.1", "--port", str(port), "-c", "4096",
                        "-t", args.threads, "--no-webui"]
            server = Server(argv, port, os.path.join(logs, f"{name}-{model}-{round_index}.log"))
            try:
                measured = {}
                if kind == "embed":
                    cold = {"cache_prompt": False} if name == "prefixd" else {}
                    post(port, "/v1/embeddings", {"input": distinct[:4], **cold})
                    times = [timed(port, "/v1/embeddings", {"input": distinct, **cold})[0] for _ in range(args.reps)]
                    measured["batch"] = args.inputs / statistics.median(times)
                    post(port, "/v1/embeddings", {"input": shared(0)})
                    times, cached = [], []
                    for rep in range(args.reps):
                        took, reply = timed(port, "/v1/embeddings", {"input": shared(rep + 1)})
                        times.append(took)
                        cached.append(reply["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0))
                        measured["prompt_tokens"] = reply["usage"]["prompt_tokens"]
                    measured["shared"] = args.inputs / statistics.median(times)
                    measured["cached"] = statistics.median(cached)
                else:
                    body = {"query": query, "documents": documents}
                    post(port, "/v1/rerank", body)
                    times = [timed(port, "/v1/rerank", body)[0] for _ in range(args.reps)]
                    measured["rerank_ms"] = 1000 * statistics.median(times)
                results.append((name, measured))
            finally:
                server.stop()

        results, _ = run_rounds(["prefixd", "llama-server"], args.rounds, run_one, f"embeddings {model}")
        rows.append((model, kind, results))

    print(f"| model | measure | prefixd | llama-server | prefixd ÷ llama-server |")
    print("| --- | --- | --- | --- | --- |")
    for model, kind, results in rows:
        def of(name, key):
            return [m[key] for n, m in results if n == name]
        keys = [("batch", f"{args.inputs} distinct inputs in one request, inputs/s"),
                ("shared", f"{args.inputs} inputs sharing a prefix, inputs/s")] if kind == "embed" else \
               [("rerank_ms", f"a query and {args.documents} documents, ms per request")]
        for key, label in keys:
            p, l = of("prefixd", key), of("llama-server", key)
            ratio = statistics.median(p) / statistics.median(l)
            print(f"| {model} | {label} | {median_spread(p)} | {median_spread(l)} | {ratio:.2f}× |")
        if kind == "embed":
            cached = of("prefixd", "cached")
            tokens = [m["prompt_tokens"] for n, m in results if n == "prefixd"]
            print(f"| {model} | of those inputs' {tokens[0]} prompt tokens, taken from prefixd's cache | "
                  f"{statistics.median(cached):.0f} | 0 | |")


if __name__ == "__main__":
    sys.exit(main())
