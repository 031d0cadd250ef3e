// qwen-code, a coding agent's CLI, run headless twice in one workspace against prefixd (run.sh starts
// the server). The agent aborts and retries a stream that delivers no chunk for its idle timeout;
// the test shortens that timeout below the server's prefill of the agent's first prompt, so only
// the server's keep-alives (--stream-keepalive) keep the first run from retrying. The second run
// resends the same system prompt and tools and must find them in the cache. The numbers checked
// are the ones an operator reads: /metrics, and /v1/cache/stats, which the web UI's cache page shows.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const base = process.env.PREFIXD_BASE_URL;
const modelId = process.env.PREFIXD_MODEL_ID;
const cli = path.join(path.dirname(fileURLToPath(import.meta.url)), "node_modules/@qwen-code/qwen-code/cli.js");

// The agent's stream idle timeout. It equals a bucket bound of prefixd's time-to-first-token
// histogram, so /metrics can show that every cold first token came later than this.
const IDLE_TIMEOUT_MS = 2500;
const IDLE_TIMEOUT_BUCKET = "2.5";

// A GET on a kept-alive connection that the server closed after its idle timeout (the agent's
// run may last that long) fails once; HTTP clients resend an idempotent request then.
async function get(path) {
  try {
    return await fetch(`${base}${path}`);
  } catch (error) {
    if (error?.cause?.code !== "UND_ERR_SOCKET") throw error;
    return fetch(`${base}${path}`);
  }
}

async function metrics() {
  const text = await (await get("/metrics")).text();
  const values = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const space = line.lastIndexOf(" ");
    values.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return (name) => {
    assert.ok(values.has(name), `/metrics has ${name}`);
    return values.get(name);
  };
}

async function cacheStats() {
  return (await get("/v1/cache/stats")).json();
}

// A home of its own (settings, session files) and a workspace with one file in it. The replies of a
// random-weight model never end, so the agent asks for one token at temperature 0. One: the agent's
// second request of a run (its memory pass) quotes the first reply, so the second run repeats the
// first only where the replies are alike, and by default the cache promises a resend's first token
// alone (docs/operator-guide.md, "Exactness": the later ones are summed over however many cells the
// context then holds, which the first run's memory pass has grown).
function makeAgentDirs() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "prefixd-agent-"));
  const home = path.join(root, "home");
  const workspace = path.join(root, "workspace");
  fs.mkdirSync(path.join(home, ".qwen"), { recursive: true });
  fs.mkdirSync(workspace);
  fs.writeFileSync(path.join(workspace, "notes.md"), "# Notes\n\nThe build uses CMake and Ninja.\n");
  const settings = {
    model: { generationConfig: { samplingParams: { max_tokens: 1, temperature: 0 } } },
    privacy: { usageStatisticsEnabled: false },
  };
  fs.writeFileSync(path.join(home, ".qwen", "settings.json"), JSON.stringify(settings));
  return { root, home, workspace };
}

function runAgent({ home, workspace }) {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(OPENAI_|QWEN_|DASHSCOPE_|ANTHROPIC_)/.test(name)),
  );
  Object.assign(env, {
    HOME: home,
    NO_COLOR: "1",
    OPENAI_BASE_URL: `${base}/v1`,
    OPENAI_API_KEY: "unused",
    OPENAI_MODEL: modelId,
    QWEN_STREAM_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS),
  });
  const run = spawnSync(process.execPath, [cli, "-p", "Summarize notes.md in one line.", "--auth-type", "openai"], {
    cwd: workspace,
    env,
    encoding: "utf8",
    timeout: 240_000,
  });
  assert.equal(run.error, undefined, `qwen-code ran: ${run.error}`);
  // What the agent prints when its stream watchdog fires or it resends a request.
  assert.doesNotMatch(run.stderr, /Retrying|No stream activity|API Error/i, `qwen-code stderr:\n${run.stderr}`);
  assert.equal(run.status, 0, `qwen-code exit status; stderr:\n${run.stderr}`);
  assert.notEqual(run.stdout.trim(), "", "qwen-code printed the model's reply");
  return run;
}

const delta = (after, before, name) => after(name) - before(name);

test("qwen-code never retries a long prefill, and its second run reuses the first run's prompt", async () => {
  const dirs = makeAgentDirs();
  try {
    const m0 = await metrics();
    runAgent(dirs);
    const m1 = await metrics();

    const firstRequests = delta(m1, m0, "prefixd_requests_total");
    assert.ok(firstRequests >= 1, "the first run sent requests");
    const firstPrompt = delta(m1, m0, "prefixd_prompt_tokens_total");
    assert.ok(firstPrompt / firstRequests >= 10_000, `agent-sized prompts (${firstPrompt} tokens in ${firstRequests})`);
    const cold = 'prefixd_time_to_first_token_by_cache_outcome_seconds_count{outcome="cold"}';
    const coldFast = `prefixd_time_to_first_token_by_cache_outcome_seconds_bucket{outcome="cold",le="${IDLE_TIMEOUT_BUCKET}"}`;
    assert.ok(delta(m1, m0, cold) >= 1, "the first run computed its prompt");
    // Without this the test would prove nothing: the agent's watchdog had time to fire.
    assert.equal(delta(m1, m0, coldFast), 0,
      `every cold first token came after the agent's ${IDLE_TIMEOUT_MS} ms idle timeout`);

    runAgent(dirs);
    const m2 = await metrics();
    const secondRequests = delta(m2, m1, "prefixd_requests_total");
    // A retry would add requests to the first run only: both runs send the same conversation.
    assert.equal(secondRequests, firstRequests, "both runs sent the same requests, none twice");
    assert.equal(delta(m2, m1, "prefixd_prompt_cache_hits_total"), secondRequests, "every request of the second run hit");
    assert.equal(delta(m2, m1, cold), 0, "nothing in the second run was cold");
    const secondPrompt = delta(m2, m1, "prefixd_prompt_tokens_total");
    const reused = delta(m2, m1, "prefixd_prompt_cache_prefix_tokens_reused_total");
    assert.ok(reused >= 0.98 * secondPrompt, `the second run reused ${reused} of ${secondPrompt} prompt tokens`);
    assert.equal(delta(m2, m1, "prefixd_prompt_tokens_fed_total"), secondPrompt - reused, "fed = prompt - reused");

    // /v1/cache/stats (the web UI's numbers) and /metrics agree.
    const stats = await cacheStats();
    const m3 = await metrics();
    assert.equal(stats.hits, m3("prefixd_prompt_cache_hits_total"));
    assert.equal(stats.misses, m3("prefixd_prompt_cache_misses_total"));
    assert.equal(stats.tokens_reused, m3("prefixd_prompt_cache_prefix_tokens_reused_total"));
    assert.equal(stats.prompt_tokens, m3("prefixd_prompt_tokens_total"));
    assert.equal(stats.outcomes.cold, m3('prefixd_prompt_cache_requests_total{outcome="cold"}'));
  } finally {
    fs.rmSync(dirs.root, { recursive: true, force: true });
  }
});
