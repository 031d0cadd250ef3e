#!/usr/bin/env python3
"""A draft model, side by side: decode speed with and without a drafter, on prefixd and llama-server,
one server at a time on the same models, threads and context.

Random weights make two different models disagree on nearly every token, so the pair is built to
agree or not by construction (prefixd-mkmodel, same preset and seed):

- target: the preset with every block from --inert-from on adding nothing to the residual stream
  (computed at full cost: as slow as the preset);
- right: the preset's first blocks alone (--layers): it computes what the target computes, so its
  greedy guesses are right but for kernel rounding;
- wrong: the same shape drawn from another seed: its guesses are nearly all wrong (the cost of
  drafting that does not pay).

Targets: prefixd without drafts, with each drafter under --draft-when paying (the default) and
always, and llama-server without drafts and with each drafter (--model-draft). Each run sends the
same chats (greedy, ignore_eos, a fixed reply length), in rounds ordered A B B A over the targets,
and keeps each reply's decode tokens per second and draft counts (timings.predicted_per_second,
draft_n, draft_n_accepted, which both servers report). Writes a Markdown report (--out).
"""
import argparse
import os
import statistics
import subprocess

from bench_server import Server, free_port, post, run_rounds, write_outputs

TOPICS = ["the sea", "a mountain town", "an old clock", "the first snow", "a night train", "a lighthouse"]
TARGETS = ["prefixd-none", "prefixd-right", "prefixd-right-always", "prefixd-wrong", "prefixd-wrong-always",
           "llama-none", "llama-right", "llama-wrong"]


def make_models(args):
    """The target and both drafters, generated once into args.models."""
    os.makedirs(args.models, exist_ok=True)
    specs = {"target": ["--inert-from", str(args.layers)],
             "right": ["--layers", str(args.layers)],
             "wrong": ["--layers", str(args.layers), "--seed", "7"]}
    paths = {}
    for name, flags in specs.items():
        path = os.path.join(args.models, f"{args.preset}-{name}-{args.layers}.gguf")
        if not os.path.exists(path):
            subprocess.run([args.mkmodel, "--preset", args.preset, *flags, "--out", path, "--quiet"], check=True)
        paths[name] = path
    return paths


def target_argv(name, args, models, port):
    drafter = "right" if "right" in name else "wrong" if "wrong" in name else None
    common = ["--model", models["target"], "--port", str(port), "--threads", str(args.threads)]
    if name.startswith("prefixd"):
        argv = [args.prefixd, "serve", *common, "--ctx-size", "4096", "--parallel", "1", "--no-cache-disk"]
        if drafter:
            argv += ["--model-draft", models[drafter], "--draft-max", str(args.draft_max),
                     "--draft-when", "always" if name.endswith("always") else "paying"]
        return argv
    argv = [args.llama_server, *common, "-c", "4096", "-np", "1", "--host", "127.0.0.1", "--no-webui"]
    if drafter:
        argv += ["--spec-type", "draft-simple", "--model-draft", models[drafter], "--spec-draft-n-max", str(args.draft_max)]
    return argv


def run_target(name, args, models, round_index, logs, results):
    port = free_port()
    server = Server(target_argv(name, args, models, port), port, os.path.join(logs, f"{name}-{round_index + 1}.log"))
    try:
        for i in range(args.requests):
            k = round_index * args.requests + i
            body = {"messages": [{"role": "user", "content": f"Tell me about {TOPICS[k % len(TOPICS)]}, take {k}."}],
                    "temperature": 0, "max_tokens": args.tokens, "ignore_eos": True}
            t = post(port, "/v1/chat/completions", body)["timings"]
            results.append({"target": name, "round": round_index, "tokens_per_s": t["predicted_per_second"],
                            "draft_n": t.get("draft_n", 0), "accepted": t.get("draft_n_accepted", 0)})
    finally:
        server.stop()


def report(results, args, elapsed):
    lines = [f"Preset `{args.preset}`: target with blocks {args.layers} on inert, drafters of its first "
             f"{args.layers} blocks (right: same seed; wrong: another seed); {args.threads} threads, "
             f"{args.tokens} tokens per reply, greedy with `ignore_eos`, `--draft-max {args.draft_max}` "
             f"(llama-server: `--spec-type draft-simple --spec-draft-n-max {args.draft_max}`), {args.rounds} rounds ordered A B B A … over "
             f"the targets, {elapsed / 60:.0f} min. Decode tokens/s: median of every reply ({args.requests} per "
             f"round) and the range; drafts: tokens drafted and accepted in all.", "",
             "| target | decode tokens/s | range | drafted | accepted | vs without |",
             "| --- | --- | --- | --- | --- | --- |"]
    medians = {}
    for target in TARGETS:
        rows = [r for r in results if r["target"] == target]
        if not rows:
            continue
        speeds = [r["tokens_per_s"] for r in rows]
        medians[target] = statistics.median(speeds)
        base = medians.get(target.split("-")[0] + "-none")
        ratio = f"{medians[target] / base:.2f}×" if not target.endswith("none") and base else ""
        lines.append(f"| {target} | {medians[target]:.1f} | {min(speeds):.1f}–{max(speeds):.1f} | "
                     f"{sum(r['draft_n'] for r in rows)} | {sum(r['accepted'] for r in rows)} | {ratio} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prefixd", default="build/bin/prefixd")
    p.add_argument("--mkmodel", default="build/bin/prefixd-mkmodel")
    p.add_argument("--llama-server", default="llama-server")
    p.add_argument("--preset", default="qwen2-0.5b")
    p.add_argument("--layers", type=int, default=2, help="the drafters' blocks; the target's first inert block")
    p.add_argument("--models", default="models/draft-pair")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--requests", type=int, default=3, help="replies per target and round")
    p.add_argument("--draft-max", type=int, default=16)
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--rounds", type=int, default=2, help="rounds, alternately in the targets' order and reversed")
    p.add_argument("--out", default="", help="write the report here too")
    p.add_argument("--json", default="", help="write every measured reply here")
    args = p.parse_args()
    models = make_models(args)
    results, elapsed = run_rounds(args.targets.split(","), args.rounds,
                                  lambda name, r, logs, results: run_target(name, args, models, r, logs, results), "draft model")
    text = report(results, args, elapsed)
    write_outputs(text, results, args.out, args.json)


if __name__ == "__main__":
    main()
