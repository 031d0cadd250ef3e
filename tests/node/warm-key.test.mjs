// docs/examples/warm-key.mjs against a real prefixd: after prepare_modules, the first chat through
// the official `openai` client reports the whole chain as cached and feeds only its own message.
// Started by run.sh (PREFIXD_BASE_URL, PREFIXD_MODEL_ID). The example is run as it ships, from a
// copy next to this file so that it finds this directory's node_modules.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const baseURL = process.env.PREFIXD_BASE_URL;
const model = process.env.PREFIXD_MODEL_ID;
assert.ok(baseURL && model, 'run this through tests/node/run.sh');

test('the warm-key example: the first chat after prepare_modules has the chain cached', async () => {
  const dir = mkdtempSync(join(here, '.example-'));
  try {
    const script = join(dir, 'warm-key.mjs');
    copyFileSync(join(here, '..', '..', 'docs', 'examples', 'warm-key.mjs'), script);
    const { stdout } = await promisify(execFile)(process.execPath, [script, 'Which hotel near the Colosseum?'], {
      env: { ...process.env, PREFIXD_BASE_URL: baseURL, PREFIXD_MODEL: model },
      timeout: 60_000,
    });
    const facts = JSON.parse(stdout.trim());
    assert.ok(facts.chain_tokens > 0, stdout);
    assert.equal(facts.cached_tokens, facts.chain_tokens, stdout);
    assert.equal(facts.fed_tokens, facts.prompt_tokens - facts.chain_tokens, stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
