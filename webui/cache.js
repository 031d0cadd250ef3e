// The cache page: /v1/cache/stats every 2 s (charts, tiers, tenants, keys) and /v1/cache/tree
// every 5 s. Only the fields a view is sure to have are relied on: a tenant's view of the stats
// (?tenant=ID, or a tenant's own key) has fewer fields than the whole cache's.

import { apiFetch, ApiError, getJson } from './api.js';
import { LineChart } from './charts.js';
import { el } from './dom.js';
import * as fmt from './format.js';
import { renderKeys, renderSessions, renderSummary, renderTenants, tierViews } from './panels.js';
import { TreeView } from './tree.js';

const STATS_EVERY_MS = 2000;
const TREE_EVERY_MS = 5000;
const SAMPLES_KEPT = 150; // five minutes at one sample per 2 s

export function mountCache(root) {
  let tenant = new URLSearchParams(location.search).get('tenant') ?? '';
  let tenantIds = [];
  let { samples, previous } = restoreSamples(tenant); // previous: the last sample's counters

  const tenantSelect = el('select', { id: 'tenant-select' });
  const tenantPicker = el('label', { class: 'tenant-picker', hidden: true }, el('span', { text: 'Tenant' }), tenantSelect);
  const updated = el('span', { id: 'cache-updated', class: 'muted' });
  const refresh = el('button', { id: 'cache-refresh', type: 'button', text: 'Refresh' });
  const errorBox = el('p', { id: 'cache-error', class: 'error-banner', role: 'alert', hidden: true });
  const summary = el('section', { id: 'cache-summary', class: 'summary' });
  const ratioChart = new LineChart({ name: 'hit-ratio', title: 'Token hit ratio', format: (v) => fmt.percent(v), fixedMax: 1 });
  const savedChart = new LineChart({ name: 'tokens-saved', title: 'Tokens saved (prompt tokens reused, cumulative)', format: fmt.compact });
  const tierCards = el('section', { id: 'tier-cards', class: 'tiers' });
  const tenantsTable = el('table', { id: 'tenants-table', class: 'data-table' });
  const keysTable = el('table', { id: 'keys-table', class: 'data-table' });
  const keysNote = el('p', { class: 'hint', hidden: true });
  const sessionsTable = el('table', { id: 'sessions-table', class: 'data-table' });
  const treeBox = el('div', { id: 'cache-tree', class: 'cache-tree' });
  const tree = new TreeView(treeBox);
  tree.showMessage('Loading…');

  root.append(el('div', { class: 'cache-page' },
    el('div', { class: 'toolbar' }, el('h1', { text: 'Prompt cache' }), tenantPicker, el('span', { class: 'spacer' }), updated, refresh),
    errorBox,
    summary,
    el('section', { class: 'charts' }, ratioChart.element, savedChart.element),
    el('h2', { text: 'Tiers' }),
    tierCards,
    el('section', {}, el('h2', { text: 'Tenants' }), el('div', { class: 'table-scroll' }, tenantsTable)),
    el('section', {}, el('h2', { text: 'Keys' }), keysNote, el('div', { class: 'table-scroll' }, keysTable)),
    el('section', {}, el('h2', { text: 'Radix tree' }),
      el('p', { class: 'hint', text: 'Each node is a run of tokens that the cached sequences below it share; a node splits where they diverge. Open nodes stay open across refreshes.' }),
      treeBox),
    el('section', {}, el('h2', { text: 'Sessions in the tree' }), el('div', { class: 'table-scroll' }, sessionsTable))));

  const query = (id) => (id ? `?tenant=${encodeURIComponent(id)}` : '');

  async function loadStats() {
    const asked = tenant;
    let stats;
    try {
      stats = await getJson(`/v1/cache/stats${query(asked)}`);
    } catch (err) {
      showError(`Could not read /v1/cache/stats: ${err.message}`);
      return;
    }
    if (asked !== tenant) return; // the tenant changed while this was on its way
    errorBox.hidden = true;
    if (stats.tenants) setTenants(Object.keys(stats.tenants));
    addSample(stats);
    renderSummary(summary, stats);
    tierCards.replaceChildren(...tierViews(stats));
    renderTenants(tenantsTable, stats);
    renderKeys(keysTable, keysNote, stats);
    updated.textContent = `updated ${fmt.clock(new Date())}`;
  }

  async function loadTree() {
    const asked = tenant;
    try {
      const response = await apiFetch(`/v1/cache/tree${query(asked)}`);
      if (asked !== tenant) return;
      if (response.status === 404) {
        const err = await ApiError.from(response);
        tree.showMessage(`No tree yet: ${err.message}`);
        renderSessions(sessionsTable, null);
        return;
      }
      if (!response.ok) throw await ApiError.from(response);
      const data = await response.json();
      if (asked !== tenant) return;
      tree.render(data);
      renderSessions(sessionsTable, data);
    } catch (err) {
      tree.showMessage(`Could not read /v1/cache/tree: ${err.message}`);
    }
  }

  function showError(text) {
    errorBox.textContent = text;
    errorBox.hidden = false;
  }

  // Only an admin's view of the whole cache lists tenants; a tenant picked from it is then
  // shown alone. Removed tenants appear as scope:<hex>, which ?tenant= cannot name.
  function setTenants(ids) {
    const next = ids.filter((id) => !id.startsWith('scope:')).sort();
    if (tenant && !next.includes(tenant)) next.push(tenant);
    if (next.join('\n') !== tenantIds.join('\n')) {
      tenantIds = next;
      tenantSelect.replaceChildren(el('option', { value: '', text: 'All tenants' }), ...next.map((id) => el('option', { value: id, text: id })));
    }
    tenantSelect.value = tenant;
    tenantPicker.hidden = tenantIds.length <= 1;
  }

  tenantSelect.addEventListener('change', () => {
    tenant = tenantSelect.value;
    history.replaceState(null, '', `/cache${query(tenant)}`);
    samples = [];
    previous = null;
    statsLoop.now();
    treeLoop.now();
  });

  // The hit ratio of each interval between two polls, from the growth of cumulative counters:
  // prompt tokens reused over prompt tokens when the stats count prompt tokens, else requests
  // that hit over requests.
  function addSample(stats) {
    const now = Date.now();
    const counters = { reused: stats.tokens_reused ?? 0, prompt: stats.prompt_tokens, hits: stats.hits ?? 0, misses: stats.misses ?? 0 };
    const byTokens = typeof counters.prompt === 'number';
    ratioChart.setTitle(byTokens ? 'Token hit ratio (per interval)' : 'Request hit ratio (per interval)',
      byTokens ? '' : 'These stats count no prompt tokens, so this is hits / (hits + misses).');
    let ratio = null;
    if (previous && counters.reused < previous.reused) samples = []; // a restarted server counts from 0
    else if (previous && byTokens) {
      const prompt = counters.prompt - previous.prompt;
      ratio = prompt > 0 ? Math.min(1, (counters.reused - previous.reused) / prompt) : null;
    } else if (previous) {
      const hits = counters.hits - previous.hits;
      const requests = hits + counters.misses - previous.misses;
      ratio = requests > 0 ? hits / requests : null;
    }
    previous = counters;
    samples.push({ t: now, ratio, saved: counters.reused });
    if (samples.length > SAMPLES_KEPT) samples.splice(0, samples.length - SAMPLES_KEPT);
    keepSamples(tenant, samples, previous);
    ratioChart.update(samples.map((s) => ({ t: s.t, v: s.ratio })), now);
    savedChart.update(samples.map((s) => ({ t: s.t, v: s.saved })), now);
  }

  const statsLoop = poller(loadStats, STATS_EVERY_MS);
  const treeLoop = poller(loadTree, TREE_EVERY_MS);
  refresh.addEventListener('click', () => {
    statsLoop.now();
    treeLoop.now();
  });
  // Opened on one tenant (/cache?tenant=ID): the whole view, once, says which others there are.
  if (tenant) getJson('/v1/cache/stats').then((all) => all.tenants && setTenants(Object.keys(all.tenants)), () => {});
  statsLoop.now();
  treeLoop.now();
}

// The samples outlive the page for the tab's session: back from the chat page, the charts
// still have their history, and the first new interval covers the chat that just happened.
const SAMPLES_STORE = 'prefixd.cacheSamples';

function restoreSamples(tenant) {
  try {
    const saved = JSON.parse(sessionStorage.getItem(SAMPLES_STORE) ?? 'null');
    if (saved?.tenant === tenant && Array.isArray(saved.samples)) {
      const since = Date.now() - SAMPLES_KEPT * STATS_EVERY_MS;
      return { samples: saved.samples.filter((s) => s.t >= since), previous: saved.previous ?? null };
    }
  } catch {
    // Unreadable or no storage: start afresh.
  }
  return { samples: [], previous: null };
}

function keepSamples(tenant, samples, previous) {
  try {
    sessionStorage.setItem(SAMPLES_STORE, JSON.stringify({ tenant, samples, previous }));
  } catch {
    // Without storage the charts start empty on each visit.
  }
}

// Runs load every interval, one at a time; now() runs it at once (or right after the running
// one). A hidden tab skips its turns.
function poller(load, interval) {
  let timer = null;
  let running = false;
  let again = false;
  const schedule = () => {
    timer = setTimeout(() => (document.hidden ? schedule() : run()), interval);
  };
  async function run() {
    clearTimeout(timer);
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      await load();
    } finally {
      running = false;
      if (again) {
        again = false;
        run();
      } else {
        schedule();
      }
    }
  }
  return { now: run };
}
