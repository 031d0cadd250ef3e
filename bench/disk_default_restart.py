#!/usr/bin/env python3
"""The disk tier as a new user gets it: no disk flag at all. An agent-sized prompt is served by a
fresh server, the server is stopped (SIGTERM) and started again with the same command line, and the
same prompt is sent again. Reported per round: the prompt's tokens, how many came from the cache
after the restart, and the time to the first token cold and after the restart (a request for one
token, so the time is the prefill and one decode step), with their ratio. Each round starts from an
empty cache home ($XDG_CACHE_HOME, so the default location is a fresh directory).

Usage: scripts/in-env python3 bench/disk_default_restart.py [--tokens 21000] [--rounds 2] [--out FILE]
"""
import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

from bench_server import Server, free_port, post, write_outputs


def agent_prompt(count):
    """A long, varied text in the shape of an agent's context: `count` tool calls and their results."""
    lines = []
    for i in range(count):
        lines.append(f"Tool call {i}: read src/module_{i % 97}/file_{i}.c; it has {100 + i % 400} lines, "
                     f"{i % 13} functions and a TODO about case {i * 7 % 1000}.")
    return "\n".join(lines)


def timed(port, prompt):
    start = time.time()
    reply = post(port, "/v1/completions", {"prompt": prompt, "max_tokens": 1, "temperature": 0}, timeout=3600)
    return time.time() - start, reply


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefixd", default="build/bin/prefixd")
    parser.add_argument("--model", default="models/default.gguf")
    parser.add_argument("--tokens", type=int, default=21000, help="prompt length to reach, in tokens")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out")
    parser.add_argument("--json")
    args = parser.parse_args()
    ctx = args.tokens + 4096
    results = []
    for round_index in range(args.rounds):
        home = tempfile.mkdtemp(prefix="prefixd-cache-home-")
        os.environ["XDG_CACHE_HOME"] = home
        argv = [args.prefixd, "serve", "--model", args.model, "--ctx-size", str(ctx), "--threads", args.threads]
        logs = tempfile.mkdtemp(prefix="prefixd-disk-default-")
        port = free_port()
        server = Server(argv + ["--port", str(port)], port, os.path.join(logs, "first.log"))
        # As many tool calls as reach --tokens (measured with the server's own tokenizer).
        count = 100
        per_call = len(post(port, "/tokenize", {"content": agent_prompt(count)})["tokens"]) / count
        count = int(args.tokens / per_call)
        prompt = agent_prompt(count)
        while len(post(port, "/tokenize", {"content": prompt})["tokens"]) < args.tokens:
            count += max(1, count // 100)
            prompt = agent_prompt(count)
        cold_s, cold = timed(port, prompt)
        startup = server.log_text()
        # The write-behind queue is written before the server exits on SIGTERM.
        server.stop()
        port = free_port()
        server = Server(argv + ["--port", str(port)], port, os.path.join(logs, "restarted.log"))
        warm_s, warm = timed(port, prompt)
        server.stop()
        tokens = cold["usage"]["prompt_tokens"]
        cached = warm["prompt_cache"]["cached_tokens"]
        disk_line = next((l for l in startup.splitlines() if "disk tier:" in l), "")
        results.append({"round": round_index + 1, "prompt_tokens": tokens, "cached_after_restart": cached,
                        "tier": warm["prompt_cache"]["tier"], "cold_s": cold_s, "restarted_s": warm_s,
                        "disk_line": disk_line[disk_line.find("disk tier:"):]})
        shutil.rmtree(home, ignore_errors=True)
    lines = ["| round | prompt tokens | cached after the restart | tier | first token cold | after the restart | ratio |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        lines.append(f"| {r['round']} | {r['prompt_tokens']:,} | {r['cached_after_restart']:,} "
                     f"({100 * r['cached_after_restart'] / r['prompt_tokens']:.1f}%) | {r['tier']} | {r['cold_s']:.1f} s | "
                     f"{r['restarted_s']:.2f} s | {r['restarted_s'] / r['cold_s']:.3f} |")
    ratios = [r["restarted_s"] / r["cold_s"] for r in results]
    lines.append("")
    lines.append(f"Median ratio {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
                 f"startup said: `{results[0]['disk_line']}`")
    write_outputs("\n".join(lines) + "\n", results, args.out, args.json)


if __name__ == "__main__":
    main()
