"""What the Python benchmarks (bench/*.py) share: a free loopback port, a JSON POST, a completion
that must generate every token asked, a server process that is up once its /health answers,
rounds of targets ordered A B B A, medians with their range, and their report put into a docs
page."""
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body, timeout=600):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.load(reply)


def get(port, path, timeout=60):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as reply:
        return json.load(reply)


def random_ids(rng, n, low=100, high=20000):
    """`n` token ids drawn from `rng` in [low, high): a prompt no cache has seen."""
    return [rng.randrange(low, high) for _ in range(n)]


def full_completion(port, body):
    """POSTs `body` to /v1/completions; the reply must hold all of its max_tokens (send ignore_eos).
    Returns the reply and the wall seconds it took."""
    start = time.perf_counter()
    reply = post(port, "/v1/completions", body)
    wall = time.perf_counter() - start
    got = reply["usage"]["completion_tokens"]
    if got != body["max_tokens"]:
        raise RuntimeError(f"asked for {body['max_tokens']} tokens, got {got}")
    return reply, wall


def median_spread(values, fmt="{:.1f}"):
    """The median of `values` and, of more than one, their range: "12.3 (11.9–13.0)"."""
    values = sorted(values)
    mid = fmt.format(statistics.median(values))
    return mid if len(values) == 1 else f"{mid} ({fmt.format(values[0])}–{fmt.format(values[-1])})"


class Server:
    def __init__(self, argv, port, log_path):
        self.port = port
        self.log_path = log_path
        self.log = open(log_path, "w")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFIXD_")}
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        raise RuntimeError(f"{argv[0]} did not come up; see {log_path}")

    def log_text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def run_rounds(targets, rounds, run_one, label):
    """Runs run_one(name, round_index, logs, results) for every target in every round, the targets
    in their order in even rounds and reversed in odd ones (A B B A ...); returns the results and
    the seconds it took."""
    results = []
    start = time.time()
    logs = tempfile.mkdtemp(prefix=label.replace(" ", "-") + "-bench-")
    print(f"{label} bench: server logs in {logs}", file=sys.stderr)
    for round_index in range(rounds):
        for name in targets if round_index % 2 == 0 else list(reversed(targets)):
            print(f"{label} bench: round {round_index + 1}, {name}", file=sys.stderr)
            run_one(name, round_index, logs, results)
    return results, time.time() - start


def write_outputs(text, results, out_path, json_path):
    """Prints the report and writes it (and every measurement, as JSON) where asked."""
    print(text)
    if out_path:
        with open(out_path, "w") as f:
            f.write(text)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(results, f, indent=1)


def put_into_docs(path, text, marker, script, heading):
    """Puts `text` into the Markdown page at `path` between the markers
    <!-- MARKER:begin (written by SCRIPT --docs) --> and <!-- MARKER:end -->, or at the page's end
    under `heading` when they are absent."""
    begin = f"<!-- {marker}:begin (written by {script} --docs) -->"
    end = f"<!-- {marker}:end -->"
    section = f"{begin}\n{text}{end}"
    with open(path) as f:
        page = f.read()
    if begin in page and end in page:
        page = page[:page.index(begin)] + section + page[page.index(end) + len(end):]
    else:
        page = page.rstrip("\n") + f"\n\n## {heading}\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(page)


def add_report_arguments(parser, marker, measured):
    """--out, --json and --docs, as every script's report takes them (write_outputs, put_into_docs)."""
    parser.add_argument("--out", default="", help="write the report here too")
    parser.add_argument("--json", default="", help=f"write every {measured} here")
    parser.add_argument("--docs", default="", help="put the report into this Markdown page, between "
                        f"<!-- {marker}:begin --> and <!-- {marker}:end --> (appended when absent)")
