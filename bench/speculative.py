#!/usr/bin/env python3
"""Speculative decoding, side by side: decode speed with and without n-gram drafts, on prefixd and
llama-server, one server at a time on the same model, threads and context.

Targets: prefixd --spec-type none / ngram (drafting where the measured costs say it pays, the
default) / ngram-always (--draft-when always: every guess verified), llama-server without
speculation / --spec-type ngram-simple. Each run of a target sends the same requests (greedy, ignore_eos, a fixed reply
length), in rounds ordered A B B A over the targets, and keeps every request's decode tokens per
second (timings.predicted_per_second, which both servers report) and draft counts
(timings.draft_n, draft_n_accepted). Workloads:

- regenerate: a chat sent twice; the second send is measured. prefixd drafts it from the first
  reply (drafts right by construction); llama-server's n-gram drafting reads only the request's own
  tokens.
- repeats: a completion prompt that repeats a phrase with a period the random-weight model does not
  follow: drafts from the prompt are proposed and mostly rejected (the cost of wrong guesses).
- plain: a chat whose prompt repeats nothing: few or no drafts (the common case's cost).

Writes a Markdown report (--out) and prints it.
"""
import argparse
import os
import statistics

from bench_server import Server, add_report_arguments, free_port, post, put_into_docs, run_rounds, write_outputs

WORDS = ("the quick brown fox jumps over the lazy dog and then runs away into the forest where it "
         "meets a bear who asks it for the way back to the river").split()
TOPICS = ["the sea", "a mountain town", "an old clock", "the first snow", "a night train", "a lighthouse"]


def target_argv(name, args, port):
    common = ["--model", args.model, "--port", str(port), "--threads", str(args.threads)]
    if name.startswith("prefixd"):
        spec = "none" if name.endswith("none") else "ngram"
        when = "always" if name.endswith("always") else "paying"
        return [args.prefixd, "serve", *common, "--ctx-size", "4096", "--parallel", "1", "--no-cache-disk", "--spec-type", spec,
                "--draft-max", str(args.draft_max), "--draft-when", when]
    argv = [args.llama_server, *common, "-c", "4096", "-np", "1", "--host", "127.0.0.1", "--no-webui"]
    if name.endswith("ngram"):
        argv += ["--spec-type", "ngram-simple", "--spec-draft-n-max", str(args.draft_max)]
    return argv


def requests_for(workload, round_index, tokens):
    """The requests of one workload in one round: (path, body, measured)."""
    out = []
    for i in range(3):
        k = round_index * 3 + i  # fresh prompts every round: no round drafts another's replies
        if workload == "regenerate":
            body = {"messages": [{"role": "user", "content": f"Tell me a story about {TOPICS[k % len(TOPICS)]}, "
                                                             f"number {k}."}],
                    "temperature": 0, "max_tokens": tokens, "ignore_eos": True}
            out.append(("/v1/chat/completions", body, False))
            out.append(("/v1/chat/completions", body, True))
        elif workload == "repeats":
            text = " ".join(WORDS[(j * (k + 3)) % len(WORDS)] for j in range(400))
            out.append(("/v1/completions", {"prompt": text, "temperature": 0, "max_tokens": tokens,
                                            "ignore_eos": True}, True))
        else:
            body = {"messages": [{"role": "user", "content": f"Describe {TOPICS[(k + 2) % len(TOPICS)]} in a few "
                                                             f"words, take {k}."}],
                    "temperature": 0, "max_tokens": tokens, "ignore_eos": True}
            out.append(("/v1/chat/completions", body, True))
    return out


def run_target(name, args, round_index, logs, results):
    port = free_port()
    server = Server(target_argv(name, args, port), port, os.path.join(logs, f"{name}-{round_index + 1}.log"))
    try:
        for workload in args.workloads:
            for path, body, measured in requests_for(workload, round_index, args.tokens):
                reply = post(port, path, body)
                if not measured:
                    continue
                t = reply["timings"]
                results.append({"target": name, "workload": workload, "round": round_index,
                                "tokens_per_s": t["predicted_per_second"], "predicted_n": t["predicted_n"],
                                "draft_n": t.get("draft_n", 0), "accepted": t.get("draft_n_accepted", 0)})
    finally:
        server.stop()


def report(results, args, elapsed):
    targets = ["prefixd-none", "prefixd-ngram", "prefixd-ngram-always", "llama-none", "llama-ngram"]
    lines = [f"Model `{os.path.basename(args.model)}`, {args.threads} threads, {args.tokens} tokens per reply, "
             f"greedy with `ignore_eos`, `--draft-max {args.draft_max}` (llama-server: `--spec-type ngram-simple "
             f"--spec-draft-n-max {args.draft_max}`), {args.rounds} rounds ordered A B B A … over the targets, "
             f"{elapsed / 60:.0f} min. Decode tokens/s: median of every measured request (3 per round) "
             f"and the range; drafts: tokens drafted and accepted in all.", "",
             "| workload | target | decode tokens/s | range | drafted | accepted | vs without |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for workload in args.workloads:
        medians = {}
        for target in targets:
            rows = [r for r in results if r["target"] == target and r["workload"] == workload]
            if not rows:
                continue
            speeds = [r["tokens_per_s"] for r in rows]
            medians[target] = statistics.median(speeds)
            base = medians.get(target.split("-")[0] + "-none")
            ratio = f"{medians[target] / base:.2f}×" if "ngram" in target and base else ""
            lines.append(f"| {workload} | {target} | {medians[target]:.1f} | {min(speeds):.1f}–{max(speeds):.1f} | "
                         f"{sum(r['draft_n'] for r in rows)} | {sum(r['accepted'] for r in rows)} | {ratio} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prefixd", default="build/bin/prefixd")
    p.add_argument("--llama-server", default="llama-server")
    p.add_argument("--model", default="models/default.gguf")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--tokens", type=int, default=192)
    p.add_argument("--draft-max", type=int, default=16)
    p.add_argument("--workloads", default="regenerate,repeats,plain")
    p.add_argument("--targets", default="prefixd-none,prefixd-ngram,prefixd-ngram-always,llama-none,llama-ngram")
    p.add_argument("--rounds", type=int, default=2, help="rounds, alternately in the targets' order and reversed")
    add_report_arguments(p, "speculative-report", "measured request")
    args = p.parse_args()
    args.workloads = args.workloads.split(",")
    results, elapsed = run_rounds(args.targets.split(","), args.rounds,
                                  lambda name, r, logs, results: run_target(name, args, r, logs, results), "speculative")
    text = report(results, args, elapsed)
    write_outputs(text, results, args.out, args.json)
    if args.docs:
        put_into_docs(args.docs, text, "speculative-report", "bench/speculative.py", "Speculative decoding: the latest run")



if __name__ == "__main__":
    main()
