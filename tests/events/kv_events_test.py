#!/usr/bin/env python3
"""A KV event subscriber built from the public wire format (ZeroMQ + MessagePack, vLLM's KV events)
against real prefixd servers: it rebuilds each tier's set of blocks from the stream and finds it
equal to the server's own view (GET /v1/cache/summary?tiers=true&tenant=...), over a mixed workload
(hits, demotions to the host tier, spills to disk), a restart that finds the disk tier's files, a
late subscriber that catches up through the replay socket, a reset, and a tenant whose blocks are
never published.

Usage: kv_events_test.py PATH_TO_PREFIXD PATH_TO_TINY_MODEL
Needs python3-zmq and python3-msgpack (scripts/sid-packages.txt)."""
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import msgpack
import zmq

PREFIXD, MODEL = sys.argv[1], sys.argv[2]
ADMIN, OTHER = "k-admin", "k-other"
END = (-1).to_bytes(8, "big", signed=True)
MEDIA = {"GPU": "device", "CPU": "host", "DISK": "disk"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def as_int(h):
    """A wire hash as its integer form: bytes carry the whole digest, the integer its last 8 bytes."""
    return int.from_bytes(h[-8:], "big") if isinstance(h, bytes) else h


class Subscriber:
    """Rebuilds {medium: set of hashes} from a SUB socket: first everything the replay socket still
    holds, then the live stream, replaying any gap in the sequence numbers through the replay socket
    (DEALER: [empty, start seq] -> [empty, seq, payload]... [empty, -1, ''])."""

    def __init__(self, context, pub, replay):
        self.sets = {m: set() for m in MEDIA.values()}
        self.raw_stored = []  # (parent, hashes, tokens) as sent
        self.cleared = 0
        self.replayed = 0
        self.next_seq = 0
        self.context, self.replay_endpoint = context, replay
        self.lock = threading.Lock()
        self.sub = context.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(pub)
        self.stop = False
        # A subscriber that connects after the publisher started may have missed its first batches,
        # and an idle server sends no later one that would show the gap: it asks for them first.
        self.ask_replay(0)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def apply(self, seq, payload):
        if seq < self.next_seq:
            return  # already applied (a replay overlapping the live stream)
        assert seq == self.next_seq, f"batch {seq} applied after {self.next_seq - 1}"
        self.next_seq = seq + 1
        ts, events = msgpack.unpackb(payload, raw=False)[:2]
        assert isinstance(ts, float)
        for e in events:
            if e[0] == "BlockStored":
                hashes, parent, tokens, block_size, lora, medium = e[1:7]
                assert lora is None and len(tokens) == len(hashes) * block_size, e
                self.raw_stored.append((parent, hashes, tokens, block_size))
                s = self.sets[MEDIA[medium]]
                for h in hashes:
                    assert as_int(h) not in s, f"{h} stored twice in {medium}"
                    s.add(as_int(h))
            elif e[0] == "BlockRemoved":
                hashes, medium = e[1:3]
                s = self.sets[MEDIA[medium]]
                for h in hashes:
                    assert as_int(h) in s, f"{h} removed from {medium} without being stored"
                    s.remove(as_int(h))
            elif e[0] == "AllBlocksCleared":
                self.cleared += 1
                for s in self.sets.values():
                    s.clear()
            else:
                raise AssertionError(f"unknown event {e[0]}")

    def ask_replay(self, start):
        dealer = self.context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.RCVTIMEO, 10000)
        dealer.connect(self.replay_endpoint)
        dealer.send_multipart([b"", start.to_bytes(8, "big")])
        while True:
            _, seq, payload = dealer.recv_multipart()
            if seq == END:
                break
            self.replayed += 1
            self.apply(int.from_bytes(seq, "big"), payload)
        dealer.close(0)

    def run(self):
        while not self.stop:
            if not self.sub.poll(50):
                continue
            topic, seq, payload = self.sub.recv_multipart()
            seq = int.from_bytes(seq, "big")
            with self.lock:
                if seq > self.next_seq:
                    self.ask_replay(self.next_seq)  # a gap: the joiner's first batches, or a drop
                self.apply(seq, payload)

    def view(self):
        with self.lock:
            return {m: set(s) for m, s in self.sets.items()}

    def close(self):
        self.stop = True
        self.thread.join()
        self.sub.close(0)


class Server:
    def __init__(self, disk, keys, hashes):
        self.port, self.pub_port, self.replay_port = free_port(), free_port(), free_port()
        self.pub = f"tcp://127.0.0.1:{self.pub_port}"
        self.replay = f"tcp://127.0.0.1:{self.replay_port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFIXD_")}
        self.log = tempfile.NamedTemporaryFile(prefix="prefixd-kv-events-", suffix=".log", delete=False)
        # Two holders and a host tier of 1,024 tokens: entries are demoted to the host tier and
        # segments spill to disk within a few requests.
        self.process = subprocess.Popen(
            [PREFIXD, "serve", "--model", MODEL, "--host", "127.0.0.1", "--port", str(self.port),
             "--ctx-size", "4096", "--parallel", "2", "--threads", "1", "--seed", "7",
             "--model-fingerprint-cache", "off", "--api-keys", keys, "--apc-hash", "sha256",
             "--prompt-cache-holders", "2", "--prompt-cache-capacity-bytes", str(1024 * 256),
             "--prompt-cache-min-prefix", "16", "--cache-disk-path", disk,
             "--kv-events-endpoint", f"tcp://*:{self.pub_port}",
             "--kv-events-replay-endpoint", f"tcp://*:{self.replay_port}",
             "--kv-events-topic", "kv@pod-a@tiny", "--kv-events-block-hashes", hashes],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        wait_until("the server", self.healthy)

    def healthy(self):
        if self.process.poll() is not None:
            raise AssertionError("prefixd exited:\n" + open(self.log.name).read())
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1).status == 200
        except OSError:
            return False

    def call(self, path, body=None, key=ADMIN):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.read().decode()

    def complete(self, prompt, key=ADMIN):
        return json.loads(self.call("/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0,
                                                        "seed": 1}, key))

    def tiers(self, tenant):
        summary = json.loads(self.call(f"/v1/cache/summary?tiers=true&tenant={tenant}"))
        return {m: {int(h[-16:], 16) for h in blocks} for m, blocks in summary["tiers"].items()}

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=60) == 0, open(self.log.name).read()


def settled(server, subscriber, tenant="default"):
    """The subscriber's rebuilt sets equal the server's view (events come within a second)."""
    def same():
        view, held = subscriber.view(), server.tiers(tenant)
        return held if view == held else None
    try:
        return wait_until("the rebuilt sets to equal the server's view", same, timeout=20)
    except AssertionError:
        view, held = subscriber.view(), server.tiers(tenant)
        for m in held:
            print(f"{m}: rebuilt {len(view[m])}, held {len(held[m])}, "
                  f"missing {len(held[m] - view[m])}, extra {len(view[m] - held[m])}", file=sys.stderr)
        raise


def chain_check(subscriber, roots):
    """Each stored run's hashes are SHA-256 chains of its tokens from its parent (--apc-hash sha256:
    h(n) = H(h(n-1) || the block's token ids as little-endian int32)); a run without a parent starts
    a prompt's chain (`roots`: the first block hashes of the prompts sent)."""
    checked = 0
    for parent, hashes, tokens, block_size in subscriber.raw_stored:
        if parent is None:
            assert hashes[0] in roots, "a run from the root starts a prompt's chain"
            h, start = hashes[0], 1
        else:
            h, start = parent, 0
        for i in range(start, len(hashes)):
            block = tokens[i * block_size:(i + 1) * block_size]
            h = hashlib.sha256(h + b"".join(t.to_bytes(4, "little") for t in block)).digest()
            assert h == hashes[i], f"block {i} of a run is not the chain of its tokens"
            checked += 1
    assert checked > 0
    return checked


def main():
    work = tempfile.mkdtemp(prefix="prefixd-kv-events-test-")
    disk = os.path.join(work, "disk")
    keys = os.path.join(work, "keys")
    with open(keys, "w") as f:
        f.write(f"{ADMIN} default admin\n{OTHER} other\n")
    context = zmq.Context()
    system = "You are a careful assistant. " * 12
    turns = [f"{system} Conversation {c}: " + " ".join(f"turn {t} of {c}" for t in range(3)) for c in range(5)]

    # 1. Live subscriber, whole hashes: hits, demotions to host, spills to disk; the other tenant's
    #    blocks never show.
    server = Server(disk, keys, "bytes")
    live = Subscriber(context, server.pub, server.replay)
    for prompt in turns:
        server.complete(prompt)
    for prompt in turns[:2]:
        server.complete(prompt + " and one more")  # a hit on the cached conversation
    for c in range(2):
        server.complete(f"Another tenant's secret {c}. " * 10, key=OTHER)
    held = settled(server, live)
    assert held["host"] and held["disk"], f"the workload reaches the host and disk tiers: {[len(s) for s in held.values()]}"
    others = server.tiers("other")
    assert any(others.values()), "the other tenant's prefixes are cached"
    for m in others:
        assert not (others[m] & live.view()[m]), "no block of the other tenant is published"
    roots = set()
    for prompt in turns:
        chain = json.loads(server.call("/v1/cache/chain", {"endpoint": "completions", "request": {"prompt": prompt}}))
        roots.add(bytes.fromhex(chain["blocks"][0]))
    checked = chain_check(live, roots)
    assert live.cleared >= 1, "a new server starts its stream with AllBlocksCleared"
    disk_before = held["disk"]
    live.close()
    server.stop()

    # 2. Restart on the same disk tier, integer hashes: the files are announced as DISK blocks.
    server = Server(disk, keys, "int")
    restarted = Subscriber(context, server.pub, server.replay)
    held = settled(server, restarted)
    assert not held["device"] and not held["host"]
    assert held["disk"] == disk_before, "the restarted server announces the files the first one left"

    # 3. Hits from disk move blocks up; a subscriber that connects late catches up through the replay.
    for prompt in turns[:3]:
        server.complete(prompt)
    settled(server, restarted)
    late = Subscriber(context, server.pub, server.replay)
    held = settled(server, late)
    assert late.replayed > 0 and held["device"], "the late subscriber rebuilt the state from the replay"

    # 4. A reset of every tenant: AllBlocksCleared, and nothing held.
    cleared_before = restarted.cleared
    server.call("/v1/cache/reset", {})
    wait_until("AllBlocksCleared", lambda: restarted.cleared > cleared_before, timeout=20)
    held = settled(server, restarted)
    assert not any(held.values())
    metrics = server.call("/metrics")
    assert 'prefixd_kv_events_total{type="AllBlocksCleared"} 2' in metrics, metrics
    for s in (restarted, late):
        s.close()
    server.stop()
    print(f"ok: {checked} chained blocks checked, {disk_before.__len__()} disk blocks across the restart, "
          f"{late.replayed} batches replayed to the late subscriber")


if __name__ == "__main__":
    main()
