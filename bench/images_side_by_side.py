#!/usr/bin/env python3
"""Images and audio, prefixd beside llama-server: a three-turn chat whose first turn carries one
image (or, with an audio projector, a 10-second audio clip as an input_audio part), on each model
family, each server with its own defaults (one slot, 2 threads, same context); the assistant
turns sent back are fixed text, so both servers get identical conversations. Per turn it
records the prompt tokens, the tokens each server evaluated, and how many times its vision
encoder ran (prefixd: the response's prompt_cache.images.encoded; llama-server: its
"encoding mtmd batch" log lines at -lv 4) and its prompt time (timings.prompt_ms, the prefill
before the first token). Then it checks that prefixd's greedy first answer with the prefix cached
equals the answer computed cold (cache_prompt false), restarts each server (prefixd on its disk
tier's directory, after its writes settled) and resends the last turn: what each evaluates then.

usage (inside the build environment, after `make build`; generated models under build/models):
  scripts/in-env python3 bench/images_side_by_side.py [--prefixd build/bin/prefixd] [--models build/models] [--rounds N]
Prints one markdown table (docs/benchmarks.md, "Images").
"""
import argparse
import base64
import math
import os
import shutil
import struct
import sys
import tempfile
import time

from bench_server import Server, free_port, get, post

FAMILIES = [
    ("dense (Qwen2-Audio projector, audio)", "tiny.gguf", "tiny-qwen2a-mmproj.gguf"),
    ("dense (Gemma 3 projector)", "tiny.gguf", "tiny-mmproj.gguf"),
    ("dense (Qwen3-VL projector)", "tiny.gguf", "tiny-qwen3vl-mmproj.gguf"),
    ("M-RoPE dense (Qwen2-VL)", "tiny-qwen2vl.gguf", "tiny-qwen2vl-mmproj.gguf"),
    ("M-RoPE dense (Qwen2.5-VL projector)", "tiny-qwen2vl.gguf", "tiny-qwen25vl-mmproj.gguf"),
    ("M-RoPE hybrid (qwen35, Qwen2-VL projector)", "qwen35-tiny.gguf", "tiny128-qwen2vl-mmproj.gguf"),
    ("sliding window (gemma3)", "gemma3-tiny.gguf", "gemma3-tiny-mmproj.gguf"),
    ("hybrid (jamba)", "archs/jamba-dense.gguf", "tiny256-mmproj.gguf"),
    ("recurrent (mamba2)", "mamba2-tiny.gguf", "gemma3-tiny-mmproj.gguf"),
]


def bmp(width, height, shade):
    row = (width * 3 + 3) // 4 * 4
    pixels = bytearray()
    for y in range(height):
        line = bytearray()
        for x in range(width):
            line += bytes([(x * 7 + shade) % 256, (y * 5 + shade * 3) % 256, (x * y + shade) % 256])
        pixels += line + b"\0" * (row - width * 3)
    header = b"BM" + struct.pack("<IHHI", 54 + len(pixels), 0, 0, 54)
    header += struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + bytes(pixels)


def wav(seconds, hertz, rate=16000):
    n = int(seconds * rate)
    data = b"".join(struct.pack("<h", int(round(0.5 * math.sin(2 * math.pi * hertz * i / rate) * 32767)))
                    for i in range(n))
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " +
            struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", len(data)) + data)


QUESTIONS = ["What does this picture show?", "Which colour covers most of it?", "Describe its shapes in one line."]
# The assistant turns both servers are sent back: fixed text, so both get identical conversations
# (their own greedy replies differ in the last digits of random-weight logits).
ANSWERS = ["A pattern of coloured stripes and gradients.", "Mostly a dark green, fading to blue at the top."]


def conversation(media):
    system = {"role": "system", "content": "You are a careful assistant who looks at pictures and answers briefly."}
    first = {"role": "user", "content": [{"type": "text", "text": QUESTIONS[0]}, media]}
    return [system, first]


def disk_settled(port):
    """Waits until prefixd's disk tier has written what it queued."""
    deadline = time.time() + 60
    while time.time() < deadline:
        disk = get(port, "/v1/cache/stats")["tiers"]["disk"]
        if disk["queue_bytes"] == 0:
            return
        time.sleep(0.05)


def last_turn(media):
    messages = conversation(media)
    for turn in range(2):
        messages = messages + [{"role": "assistant", "content": ANSWERS[turn]},
                               {"role": "user", "content": QUESTIONS[turn + 1]}]
    return messages


def evaluated_of(reply, is_prefixd):
    return reply["prompt_cache"]["fed_tokens"] if is_prefixd else reply["timings"]["prompt_n"]


def run_turns(server, is_prefixd, media):
    messages = conversation(media)
    turns = []
    replies = []
    for turn in range(3):
        before = server.log_text().count("encoding mtmd batch") if not is_prefixd else 0
        body = {"messages": messages, "max_tokens": 8, "temperature": 0}
        reply = post(server.port, "/v1/chat/completions", body)
        text = reply["choices"][0]["message"]["content"]
        replies.append(text)
        prompt = reply["usage"]["prompt_tokens"]
        evaluated = evaluated_of(reply, is_prefixd)
        if is_prefixd:
            encodes = reply["prompt_cache"].get("images", {}).get("encoded", 0)
        else:
            time.sleep(0.2)
            encodes = server.log_text().count("encoding mtmd batch") - before
        turns.append((prompt, evaluated, encodes, reply["timings"]["prompt_ms"]))
        if turn + 1 < len(QUESTIONS):
            messages = messages + [{"role": "assistant", "content": ANSWERS[turn]},
                                   {"role": "user", "content": QUESTIONS[turn + 1]}]
    return turns, replies


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefixd", default="build/bin/prefixd")
    parser.add_argument("--llama-server", default="llama-server")
    parser.add_argument("--models", default="build/models")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs per server and family; 2 or more run the servers A B B A and report the prompt "
                             "times' median (min-max)")
    args = parser.parse_args()
    image = {"type": "image_url",
             "image_url": {"url": "data:image/bmp;base64," + base64.b64encode(bmp(40, 30, 3)).decode()}}
    audio = {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav(10.0, 440)).decode(), "format": "wav"}}
    logs = tempfile.mkdtemp(prefix="prefixd-images-")
    rows = []
    for name, model, projector in FAMILIES:
        model_path = os.path.join(args.models, model)
        projector_path = os.path.join(args.models, projector)
        results = {"prefixd": [], "llama-server": []}
        media = audio if "audio" in name else image
        order = ["prefixd", "llama-server"] if args.rounds < 2 else ["prefixd", "llama-server", "llama-server", "prefixd"]
        targets = [order[i % len(order)] for i in range(2 * max(args.rounds, 1))]
        for target in targets:
            port = free_port()
            disk = tempfile.mkdtemp(prefix="prefixd-images-disk-")
            if target == "prefixd":
                argv = [args.prefixd, "serve", "--model", model_path, "--mmproj", projector_path, "--host", "127.0.0.1",
                        "--port", str(port), "--ctx-size", "4096", "--parallel", "1", "--threads", args.threads,
                        "--model-fingerprint-cache", "off", "--cache-disk-path", disk]
            else:
                argv = [args.llama_server, "-m", model_path, "--mmproj", projector_path, "--host", "127.0.0.1",
                        "--port", str(port), "-c", "4096", "-np", "1", "-t", args.threads, "--no-webui", "-lv", "4"]
            log = os.path.join(logs, f"{target}-{model.replace('/', '-')}-{projector}.log")
            server = Server(argv, port, log)
            restarted = None
            try:
                turns, replies = run_turns(server, target == "prefixd", media)
                cold_equal = None
                if target == "prefixd":
                    # The first turn again with nothing cached: greedy output must not depend on the cache.
                    cold = post(port, "/v1/chat/completions", {"messages": conversation(media), "max_tokens": 8,
                                                               "temperature": 0, "cache_prompt": False})
                    cold_equal = cold["choices"][0]["message"]["content"] == replies[0]
                    disk_settled(port)
                server.stop()
                server = None
                restarted = Server(argv, port, log + ".restarted")
                again = post(port, "/v1/chat/completions", {"messages": last_turn(media), "max_tokens": 8, "temperature": 0})
                after_restart = (evaluated_of(again, target == "prefixd"), again["timings"]["prompt_ms"])
                results[target].append((turns, cold_equal, after_restart))
            finally:
                if server is not None:
                    server.stop()
                if restarted is not None:
                    restarted.stop()
                shutil.rmtree(disk, ignore_errors=True)
        rows.append((name, results))
    print("| model (projector) | turn | prompt tokens prefixd / llama-server | evaluated prefixd / llama-server | "
          "image encodes prefixd / llama-server | prompt ms prefixd / llama-server |")
    print("| --- | --- | --- | --- | --- | --- |")
    def spread(values):
        values = sorted(values)
        middle = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
        return f"{middle:.0f}" if len(values) == 1 else f"{middle:.0f} ({values[0]:.0f}–{values[-1]:.0f})"

    for name, results in rows:
        p_runs, l_runs = results["prefixd"], results["llama-server"]
        # Token counts are the same in every run of a server (the checks below say so); times vary.
        p_turns, _, p_restart = p_runs[0]
        l_turns, _, l_restart = l_runs[0]
        same = all(r[0][t][:3] == p_turns[t][:3] and r[2][0] == p_restart[0] for r in p_runs for t in range(3)) and \
            all(r[0][t][:3] == l_turns[t][:3] and r[2][0] == l_restart[0] for r in l_runs for t in range(3))
        cold_equal = all(r[1] for r in p_runs)
        for turn in range(3):
            p, l = p_turns[turn], l_turns[turn]
            print(f"| {name if turn == 0 else ''} | {turn + 1} | {p[0]} / {l[0]} | {p[1]} / {l[1]} | {p[2]} / {l[2]} | "
                  f"{spread([r[0][turn][3] for r in p_runs])} / {spread([r[0][turn][3] for r in l_runs])} |")
        print(f"| | 3 again after a restart | | {p_restart[0]} / {l_restart[0]} | | "
              f"{spread([r[2][1] for r in p_runs])} / {spread([r[2][1] for r in l_runs])} |")
        if not same:
            print("| | token counts differed between runs of a server | | | | |")
        print(f"| | warm = cold (greedy, prefixd) | {'yes' if cold_equal else 'NO'} | | | |")
    print(f"\nlogs: {logs}", file=sys.stderr)


if __name__ == "__main__":
    main()
