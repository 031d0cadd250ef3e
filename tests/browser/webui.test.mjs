// The built-in web UI in headless Chromium against real prefixd servers (run.sh starts them):
//   1. the chat page streams a reply (its text grows in steps) and marks it done;
//   2. a second turn reuses the first turn's prefix, and the numbers the page shows are the ones
//      the API sent in that very stream (the server drafts with --spec-type ngram: its draft
//      counts too);
//   3. the cache page shows tier cards, charts, a control-plane key and the radix tree with the
//      system prompt in it, and a node the user opened or closed stays so across a refresh;
//   4. a server with --api-key: the page asks for the key, asks again after a wrong one, then
//      chats;
//   5. a server with --api-keys (tenants acme and globex, and an admin key of tenant ops): the
//      cache page, with the admin key, offers a tenant picker and shows the picked tenant's tree
//      alone; with acme's key it shows no picker and only acme's tree;
//   6. a server with every layer on a GPU (run.sh leaves it out when PREFIXD_TEST_NO_GPU=1): the
//      device card says how many layers are on the GPU and shows the bytes of K/V in GPU memory
//      that /v1/cache/stats reports; the CPU server's card says its cells are in host RAM;
// with no console error or uncaught exception on any page (but the 401s that make the page ask
// for the key). Screenshots: chat.png, cache.png, cache-tenant.png and cache-gpu.png in
// $PREFIXD_TEST_ARTIFACTS.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import * as fmt from '../../webui/format.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const baseUrl = requiredEnv('PREFIXD_WEBUI_URL');
const keyedUrl = requiredEnv('PREFIXD_WEBUI_KEYED_URL');
const apiKey = requiredEnv('PREFIXD_WEBUI_API_KEY');
const tenantsUrl = requiredEnv('PREFIXD_WEBUI_TENANTS_URL');
const adminKey = requiredEnv('PREFIXD_WEBUI_ADMIN_KEY');
const acmeKey = requiredEnv('PREFIXD_WEBUI_ACME_KEY');
const globexKey = requiredEnv('PREFIXD_WEBUI_GLOBEX_KEY');
const artifacts = requiredEnv('PREFIXD_TEST_ARTIFACTS');
const gpuUrl = process.env.PREFIXD_WEBUI_GPU_URL ?? '';

// The machine that runs this can be slow and busy: every wait is for a condition, with room.
const WAIT_MS = 60_000;
const TEST_MS = 240_000;

// Longer than the cache's minimum prefix (32 tokens), so the second turn has a prefix to reuse.
const SYSTEM_PROMPT =
  'You are Quill, a patient assistant for a small bookshop. Answer questions about opening hours, ' +
  'orders and recommendations in two or three plain sentences, and say so when you do not know.';

// One system prompt per tenant of the --api-keys server, each longer than the cache's minimum
// prefix, and each with a phrase near its start (a tree node's text is at most 200 bytes) that
// the other lacks.
const ACME_PHRASE = 'Roadrunner, the order desk of Acme';
const GLOBEX_PHRASE = 'Hank, the front desk of Globex';
const ACME_PROMPT =
  `You are ${ACME_PHRASE} Corporation. Help customers track anvils, rockets and giant magnets, ` +
  'quote delivery dates for the desert, and refuse politely to discuss any coyote.';
const GLOBEX_PROMPT =
  `You are ${GLOBEX_PHRASE} Corporation in Cypress Creek. Greet visitors, book meeting rooms, ` +
  'direct them to the hammock district, and never mention the volcano lair.';

let browser;
let page; // the keyless server's page, shared by tests 1 to 3: they continue one session
const problems = []; // console errors and uncaught exceptions of that page

before(async () => {
  browser = await chromium.launch({
    executablePath: path.join(here, 'chromium.sh'),
    headless: true,
    // As root in a chroot Chromium has no sandbox to start; there is no GPU either.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    timeout: WAIT_MS,
  });
  page = await newPage(problems);
});

after(async () => {
  await browser?.close();
});

test('the chat page streams a reply', { timeout: TEST_MS }, async () => {
  await page.goto(`${baseUrl}/`);
  await page.locator('#model-name').filter({ hasText: 'model' }).waitFor();
  assert.equal(await page.locator('#api-key-form').isVisible(), false, 'a server without keys must not ask for one');

  await page.fill('#system-prompt', SYSTEM_PROMPT);
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', '48');

  // Every length the newest reply's text has had, recorded as the page changes it.
  await page.evaluate(() => {
    window.replyLengths = [];
    const messages = document.getElementById('messages');
    new MutationObserver(() => {
      const replies = messages.querySelectorAll('.assistant-message .message-content');
      const length = replies.length ? replies[replies.length - 1].textContent.length : 0;
      if (window.replyLengths.at(-1) !== length) window.replyLengths.push(length);
    }).observe(messages, { childList: true, subtree: true, characterData: true });
  });

  await page.fill('#chat-input', 'Hello there');
  await page.press('#chat-input', 'Enter');
  const reply = page.locator('.assistant-message[data-done="true"]').first();
  await reply.waitFor();

  const finalLength = (await reply.locator('.message-content').textContent()).length;
  const lengths = await page.evaluate(() => window.replyLengths);
  const steps = new Set(lengths.filter((n) => n > 0 && n < finalLength));
  assert.ok(finalLength > 0, 'the reply has text');
  assert.ok(steps.size >= 2, `the reply grew in steps before reaching ${finalLength} characters; lengths seen: ${lengths.join(', ')}`);
  assert.equal(await page.locator('.error-message').count(), 0, 'no error in the conversation');

  const data = await reply.evaluate((e) => ({ ...e.dataset }));
  assert.match(data.promptTokens, /^[1-9]\d*$/);
  assert.match(data.cachedTokens, /^\d+$/);
  assert.match(data.computedTokens, /^[1-9]\d*$/);
  assert.match(data.ttftMs, /^\d+$/);
  assert.ok(data.tier, 'data-tier is set');
  assert.match(await reply.locator('.stats-line').textContent(), /prompt \d+ tokens · \d+ cached/);
});

test('a second turn reuses the first one, and the page shows the API\'s numbers', { timeout: TEST_MS }, async () => {
  const posted = page.waitForResponse(
    (r) => r.url().endsWith('/v1/chat/completions') && r.request().method() === 'POST',
    { timeout: WAIT_MS });
  await page.fill('#chat-input', 'Are you open on Sunday?');
  await page.click('#chat-send');
  const reply = page.locator('.assistant-message[data-done="true"]').nth(1);
  await reply.waitFor();

  const response = await posted;
  assert.equal(response.status(), 200);
  const chunks = (await response.text()).split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice(6)));
  const cacheChunk = chunks.find((c) => c.prompt_cache);
  assert.ok(cacheChunk, 'the stream carries prompt_cache');
  const usage = chunks.findLast((c) => c.usage)?.usage;
  assert.ok(usage, 'the stream carries usage');

  const data = await reply.evaluate((e) => ({ ...e.dataset }));
  assert.equal(Number(data.promptTokens), usage.prompt_tokens);
  assert.equal(Number(data.cachedTokens), cacheChunk.prompt_cache.cached_tokens);
  assert.equal(Number(data.computedTokens), cacheChunk.prompt_cache.fed_tokens);
  assert.equal(data.tier, cacheChunk.prompt_cache.tier ?? 'none');
  assert.ok(cacheChunk.prompt_cache.cached_tokens > 0, `the second turn reuses the first turn's prefix (${JSON.stringify(cacheChunk.prompt_cache)})`);
  const timings = chunks.findLast((c) => c.timings)?.timings;
  assert.ok(timings && typeof timings.draft_n === 'number', `the stream carries draft counts (${JSON.stringify(timings)})`);
  assert.equal(Number(data.draftTokens), timings.draft_n);
  assert.equal(Number(data.draftAccepted), timings.draft_n_accepted);
  if (timings.draft_n > 0) {
    assert.match(await reply.locator('.stats-line').textContent(), new RegExp(`drafts ${timings.draft_n_accepted} of ${timings.draft_n} accepted`));
  }
  assert.match(await reply.locator('.stats-line').textContent(), new RegExp(`prompt ${usage.prompt_tokens} tokens`));

  await screenshot(page, 'chat.png');
});

test('the cache page shows the tiers, charts, keys and the radix tree', { timeout: TEST_MS }, async () => {
  const created = await fetch(`${baseUrl}/v1/cache/set`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ key: 'webui-test-key', ttl_seconds: 600, meta: { purpose: 'browser test' } }),
  });
  assert.equal(created.status, 200, await created.text());

  await page.goto(`${baseUrl}/cache`);
  await page.locator('.tier-card[data-tier="device"]').waitFor();
  await page.locator('.tier-card[data-tier="host"]').waitFor();
  for (const tier of ['checkpoints', 'disk', 'shared']) {
    assert.equal(await page.locator(`.tier-card[data-tier="${tier}"]`).count(), 1, `a ${tier} card`);
  }
  assert.match(await page.locator('.tier-card[data-tier="disk"] .tier-state').textContent(), /off/);
  const cpuDevice = page.locator('.tier-card[data-tier="device"]');
  assert.match(await cpuDevice.locator('.tier-subtitle').textContent(), /host RAM: the model runs on the CPU/);
  assert.equal(await cpuDevice.locator('dt', { hasText: 'in GPU memory' }).count(), 0, 'no GPU row on the CPU');
  await page.locator('.chart').first().waitFor();
  await page.locator('.chart svg .point').first().waitFor();
  assert.ok(await page.locator('.chart').count() >= 2, 'hit ratio and tokens saved charts');
  assert.equal(await page.locator('#tenant-select').isVisible(), false, 'one tenant: no tenant picker');
  const keyRow = page.locator('#keys-table tbody tr').filter({ hasText: 'webui-test-key' });
  await keyRow.waitFor();
  assert.match(await keyRow.textContent(), /10 min.*browser test/);

  // The tree holds the conversation: some node's text starts with the system prompt.
  const tree = page.locator('#cache-tree');
  await tree.locator('.tree-node', { hasText: 'patient assistant for a small bookshop' }).first().waitFor();

  // Close a node with children, refresh, and it stays closed; open it again.
  const node = tree.locator('details.tree-node:not(.leaf)').first();
  await node.waitFor();
  const key = await node.getAttribute('data-key');
  const byKey = tree.locator(`details.tree-node[data-key="${key}"]`);
  const isOpen = () => byKey.evaluate((e) => e.open);
  if (await isOpen()) {
    await byKey.locator(':scope > summary').click();
    assert.equal(await isOpen(), false);
  }
  const renders = Number(await tree.getAttribute('data-renders'));
  await page.click('#cache-refresh');
  await page.waitForFunction((n) => Number(document.getElementById('cache-tree').dataset.renders) > n, renders, { timeout: WAIT_MS });
  assert.equal(await isOpen(), false, 'a closed node stays closed across a refresh');
  await byKey.locator(':scope > summary').click();
  assert.equal(await isOpen(), true, 'the node opens');
  await byKey.locator(':scope > details.tree-node').first().waitFor();
  const renders2 = Number(await tree.getAttribute('data-renders'));
  await page.click('#cache-refresh');
  await page.waitForFunction((n) => Number(document.getElementById('cache-tree').dataset.renders) > n, renders2, { timeout: WAIT_MS });
  assert.equal(await isOpen(), true, 'an opened node stays open across a refresh');

  // A request between two polls gives the hit ratio chart its first interval: the first
  // turn's prompt again, all of it cached now.
  const ratioValue = page.locator('.chart[data-chart="hit-ratio"] .chart-value');
  assert.equal(await ratioValue.textContent(), '', 'no interval with requests yet');
  const again = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'system', content: SYSTEM_PROMPT }, { role: 'user', content: 'Hello there' }], max_tokens: 4, temperature: 0 }),
  });
  assert.equal(again.status, 200, await again.text());
  await page.waitForFunction(() => /\d%$/.test(document.querySelector('.chart[data-chart="hit-ratio"] .chart-value').textContent), null, { timeout: WAIT_MS });

  await screenshot(page, 'cache.png');
  assert.deepEqual(problems, [], 'no console errors on the keyless server\'s pages');
});

test('a server with a key: the page asks for it, then chats', { timeout: TEST_MS }, async () => {
  const seen = [];
  const keyed = await newPage(seen);
  await keyed.goto(`${keyedUrl}/`);
  await keyed.locator('#api-key-form').waitFor({ state: 'visible' });
  // A wrong key: the server refuses it and the form asks again.
  await keyed.fill('#api-key', 'sk-not-this-one');
  await keyed.locator('#api-key-form button[type="submit"]').click();
  await keyed.locator('#api-key-note', { hasText: 'did not accept' }).waitFor();
  await keyed.locator('#api-key-form').waitFor({ state: 'visible' });
  await keyed.fill('#api-key', apiKey);
  await keyed.locator('#api-key-form button[type="submit"]').click();
  await keyed.locator('#api-key-form').waitFor({ state: 'hidden' });
  await keyed.locator('#model-name').filter({ hasText: 'model' }).waitFor();

  await keyed.fill('#max-tokens', '16');
  await keyed.fill('#temperature', '0');
  await keyed.fill('#chat-input', 'Hello with a key');
  await keyed.click('#chat-send');
  await keyed.locator('.assistant-message[data-done="true"]').waitFor();
  assert.equal(await keyed.locator('.error-message').count(), 0, 'no error in the conversation');
  assert.match(await keyed.locator('.assistant-message .stats-line').textContent(), /prompt \d+ tokens/);

  // The browser reports the 401 that made the page ask for the key as a failed resource.
  const unexpected = seen.filter((p) => !/status of 401/.test(p));
  assert.deepEqual(unexpected, [], 'no console errors but the 401 before the key');
  await keyed.context().close();
});

test('a server with tenants: an admin picks a tenant on the cache page, a tenant sees only its own', { timeout: TEST_MS }, async () => {
  for (const [key, system] of [[acmeKey, ACME_PROMPT], [globexKey, GLOBEX_PROMPT]]) {
    const response = await fetch(`${tenantsUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
      body: JSON.stringify({ messages: [{ role: 'system', content: system }, { role: 'user', content: 'Hello' }], max_tokens: 4, temperature: 0 }),
    });
    assert.equal(response.status, 200, await response.text());
  }

  const seen = [];
  const admin = await newPage(seen);
  await admin.goto(`${tenantsUrl}/cache`);
  await enterKey(admin, adminKey);

  // The admin's view of the whole cache lists both tenants, and the picker offers them.
  const select = admin.locator('#tenant-select');
  await select.waitFor({ state: 'visible' });
  await admin.locator('#tenant-select option[value="acme"]').waitFor({ state: 'attached' });
  await admin.locator('#tenant-select option[value="globex"]').waitFor({ state: 'attached' });
  await waitForTree(admin, [ACME_PHRASE, GLOBEX_PHRASE], []);

  await select.selectOption('acme');
  await waitForTree(admin, [ACME_PHRASE], [GLOBEX_PHRASE]);
  assert.equal(new URL(admin.url()).searchParams.get('tenant'), 'acme', 'the address names the tenant picked');
  await admin.locator('#tenants-table tbody tr').filter({ hasText: 'acme' }).waitFor();
  assert.equal(await admin.locator('#tenants-table tbody tr').count(), 1, 'the tenants table shows acme alone');

  await select.selectOption('globex');
  await waitForTree(admin, [GLOBEX_PHRASE], [ACME_PHRASE]);
  assert.equal(new URL(admin.url()).searchParams.get('tenant'), 'globex', 'the address names the tenant picked');
  await admin.locator('#tenants-table tbody tr').filter({ hasText: 'globex' }).waitFor();
  assert.equal(await admin.locator('#tenants-table tbody tr').count(), 1, 'the tenants table shows globex alone');
  assert.equal(await select.isVisible(), true, 'the picker stays while one tenant is shown');
  await screenshot(admin, 'cache-tenant.png');
  await admin.context().close();

  // A tenant's own key, in a browser that has not seen the admin's: its view only, no picker.
  const tenant = await newPage(seen);
  await tenant.goto(`${tenantsUrl}/cache`);
  await enterKey(tenant, acmeKey);
  await waitForTree(tenant, [ACME_PHRASE], [GLOBEX_PHRASE]);
  await tenant.locator('#cache-updated', { hasText: 'updated' }).waitFor(); // the stats are in
  assert.equal(await tenant.locator('#tenant-select').isVisible(), false, 'a tenant\'s key: no tenant picker');
  await tenant.context().close();

  // The browser reports the 401s that made the pages ask for the key as failed resources.
  const unexpected = seen.filter((p) => !/status of 401/.test(p));
  assert.deepEqual(unexpected, [], 'no console errors but the 401 before the key');
});

test('a server on a GPU: the device card shows the layers there and the K/V in GPU memory', {
  timeout: TEST_MS,
  skip: gpuUrl ? false : 'PREFIXD_TEST_NO_GPU=1: no server on a GPU',
}, async () => {
  const response = await fetch(`${gpuUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'system', content: SYSTEM_PROMPT }, { role: 'user', content: 'Hello' }], max_tokens: 2, temperature: 0 }),
  });
  assert.equal(response.status, 200, await response.text());
  // Idle now: the device tier keeps the conversation's cells (half the context may stay idle on a
  // GPU), so the numbers hold still while the page polls.
  const stats = await (await fetch(`${gpuUrl}/v1/cache/stats`)).json();
  assert.ok(stats.compute.layers_on_gpu > 0, `layers on the GPU: ${JSON.stringify(stats.compute)}`);
  assert.ok(stats.tiers.device.gpu_bytes > 0, `device-tier bytes in GPU memory: ${JSON.stringify(stats.tiers.device)}`);

  const seen = [];
  const gpu = await newPage(seen);
  await gpu.goto(`${gpuUrl}/cache`);
  const card = gpu.locator('.tier-card[data-tier="device"]');
  const row = (label) => card.locator('dt', { hasText: new RegExp(`^${escapeRegExp(label)}$`) })
    .locator('xpath=following-sibling::dd[1]');
  await row('in GPU memory').waitFor();
  assert.match(await card.locator('.tier-subtitle').textContent(),
    new RegExp(`${stats.compute.layers_on_gpu} of ${stats.compute.layers} layers on the GPU`));
  assert.equal(await row('in GPU memory').textContent(), fmt.bytes(stats.tiers.device.gpu_bytes));
  assert.equal(await row('context K/V on the GPU').textContent(), fmt.bytes(stats.compute.kv_gpu_bytes));
  assert.match(await row('GPU memory').textContent(), new RegExp(`^${escapeRegExp(fmt.bytes(stats.compute.gpu_memory_bytes))} on 1 device$`));
  await screenshot(gpu, 'cache-gpu.png');
  await gpu.context().close();
  assert.deepEqual(seen, [], 'no console errors');
});

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// The page asks for a key at its first 401; this enters one and waits for the form to go.
async function enterKey(p, key) {
  await p.locator('#api-key-form').waitFor({ state: 'visible' });
  await p.fill('#api-key', key);
  await p.locator('#api-key-form button[type="submit"]').click();
  await p.locator('#api-key-form').waitFor({ state: 'hidden' });
}

// Waits until the cache tree has, for each phrase of `shown`, a node whose text holds it, and no
// node whose text holds a phrase of `absent`.
async function waitForTree(p, shown, absent) {
  await p.waitForFunction(([yes, no]) => {
    const texts = [...document.querySelectorAll('#cache-tree .tree-node')].map((n) => n.textContent);
    return yes.every((s) => texts.some((t) => t.includes(s))) && !no.some((s) => texts.some((t) => t.includes(s)));
  }, [shown, absent], { timeout: WAIT_MS });
}

async function newPage(sink) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const p = await context.newPage();
  p.setDefaultTimeout(WAIT_MS);
  p.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') sink.push(`console ${m.type()} on ${p.url()}: ${m.text()}`);
  });
  p.on('pageerror', (err) => sink.push(`uncaught on ${p.url()}: ${err.message}`));
  return p;
}

// From the top: a full-page capture keeps the scroll position, and the sticky bar would show
// halfway down.
async function screenshot(p, name) {
  await p.evaluate(() => window.scrollTo(0, 0));
  await p.screenshot({ path: path.join(artifacts, name), fullPage: true });
}

function requiredEnv(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this through tests/browser/run.sh`);
  return value;
}
