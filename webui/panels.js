// The cache page's panels, each built from one /v1/cache/stats or /v1/cache/tree answer:
// summary tiles, one card per tier, and the tenants, keys and sessions tables. They are
// rebuilt whole on each poll.

import { el } from './dom.js';
import * as fmt from './format.js';

export function renderSummary(box, s) {
  const requests = (s.hits ?? 0) + (s.misses ?? 0);
  const tiles = [
    ['Requests', fmt.count(requests), `${fmt.count(s.hits)} hits · ${fmt.count(s.misses)} misses`],
    ['Request hit ratio', requests ? fmt.percent(s.hits / requests, 1) : '—', 'requests that reused a prefix'],
    ['Tokens reused', fmt.count(s.tokens_reused), typeof s.prompt_tokens === 'number' && s.prompt_tokens > 0
      ? `${fmt.percent(s.tokens_reused / s.prompt_tokens, 1)} of ${fmt.count(s.prompt_tokens)} prompt tokens`
      : 'prompt tokens not computed again'],
    ['Held', fmt.bytes(s.bytes), `${fmt.count(s.entries)} ${s.entries === 1 ? 'entry' : 'entries'} (device, host, checkpoints)`],
  ];
  if (typeof s.seconds_saved === 'number') tiles.push(['Prefill time saved', fmt.seconds(s.seconds_saved), 'at the measured prefill rate']);
  if (typeof s.running === 'number') tiles.push(['Now', `${fmt.count(s.running)} running`, `${fmt.count(s.waiting)} waiting for a shared prefix`]);
  const outcomes = Object.entries(s.outcomes ?? {}).map(([name, n]) => `${name.replace('_', ' ')} ${fmt.count(n)}`).join(' · ');
  tiles.push(['Model', `${s.family ?? '—'}`, `reuse: ${s.reuse ?? '—'}${s.block_size ? ` · blocks of ${s.block_size} tokens` : ''}${s.enabled === false ? ' · cache off' : ''}`]);
  box.replaceChildren(
    ...tiles.map(([label, value, detail]) => el('div', { class: 'tile' }, el('div', { class: 'tile-label', text: label }), el('div', { class: 'tile-value', text: value }), el('div', { class: 'tile-detail', text: detail }))),
    el('p', { class: 'outcomes', text: outcomes ? `Outcomes: ${outcomes}` : '' }));
}

// One card per tier. The whole cache's view carries capacities; a tenant's only its usage.
export function tierViews(s) {
  const device = s.tiers?.device ?? {};
  const host = s.tiers?.host ?? {};
  const disk = s.tiers?.disk ?? {};
  const remote = s.tiers?.remote ?? {};
  const snaps = s.snapshots ?? {};
  const perToken = s.kv_bytes_per_token;
  // Where the device tier's cells live: the offloaded layers keep their K/V in GPU memory.
  const compute = s.compute ?? {};
  const gpuDevices = Array.isArray(compute.gpu_devices) ? compute.gpu_devices.length : 0;
  const onGpu = gpuDevices > 0 && compute.layers_on_gpu > 0;
  const deviceWhere = onGpu
    ? `K/V cells in the model's own memory (${fmt.count(compute.layers_on_gpu)} of ${fmt.count(compute.layers)} layers on the GPU), shared in place`
    : 'K/V cells in the model\'s own memory (host RAM: the model runs on the CPU), shared in place';

  const deviceMeter = device.budget_cells > 0
    ? meter(device.cells, device.budget_cells, 'cells of the cell budget')
    : meter(device.entries, device.max_entries, 'holders in use');
  const cards = [
    tierCard('device', 'Device', deviceWhere, true, deviceMeter, [
      ['entries', withMax(device.entries, device.max_entries, 'holders')],
      ['cells', device.budget_cells > 0 ? withMax(device.cells, device.budget_cells) : fmt.count(device.cells)],
      ['locked cells', device.locked_cells === undefined ? null : fmt.count(device.locked_cells)],
      ['bytes', fmt.bytes(device.bytes)],
      ['in GPU memory', onGpu ? fmt.bytes(device.gpu_bytes) : null],
      ['GPU memory', onGpu ? `${fmt.bytes(compute.gpu_memory_bytes)} on ${fmt.count(gpuDevices)} ${gpuDevices === 1 ? 'device' : 'devices'}` : null],
      ['context K/V on the GPU', onGpu ? fmt.bytes(compute.kv_gpu_bytes) : null],
      ['recurrent states', device.states ? fmt.count(device.states) : null],
    ]),
    tierCard('host', 'Host', 'serialized K/V segments in RAM', true, meter(host.bytes, host.capacity_bytes, 'of the byte budget'), [
      ['segments', withMax(host.entries, host.max_entries)],
      ['tokens', host.tokens === undefined ? null : fmt.count(host.tokens)],
      ['bytes', host.capacity_bytes ? `${fmt.bytes(host.bytes)} of ${fmt.bytes(host.capacity_bytes)}` : fmt.bytes(host.bytes)],
      ['about', perToken && host.bytes ? `${fmt.count(Math.round(host.bytes / perToken))} tokens' worth` : null],
    ]),
    tierCard('checkpoints', 'Checkpoints', 'recurrent state or window cells at turn boundaries', true, meter(snaps.bytes, snaps.capacity_bytes, 'of the byte budget'), [
      ['checkpoints', withMax(snaps.entries, snaps.max_entries)],
      ['bytes', snaps.capacity_bytes ? `${fmt.bytes(snaps.bytes)} of ${fmt.bytes(snaps.capacity_bytes)}` : fmt.bytes(snaps.bytes)],
      ['sessions', snaps.sessions === undefined ? null : fmt.count(snaps.sessions)],
      ['taken · restored', snaps.saved === undefined ? null : `${fmt.count(snaps.saved)} · ${fmt.count(snaps.restores)}`],
    ], s.reuse === 'trim' ? 'This model reuses any prefix: it needs no checkpoints.' : ''),
    tierCard('disk', 'Disk', disk.path ? disk.path : 'verified files that outlive a restart', !!disk.enabled,
      meter(disk.bytes, disk.capacity_bytes, 'of the byte budget'), [
        ['files', fmt.count(disk.entries)],
        ['segments · checkpoints', disk.segments === undefined ? null : `${fmt.count(disk.segments)} · ${fmt.count(disk.checkpoints)}`],
        ['tokens', fmt.count(disk.tokens)],
        ['bytes', disk.capacity_bytes ? `${fmt.bytes(disk.bytes)} of ${fmt.bytes(disk.capacity_bytes)}` : fmt.bytes(disk.bytes)],
        ['hits', fmt.count(disk.hits)],
        ['reads · writes', disk.reads === undefined ? null : `${fmt.count(disk.reads)} · ${fmt.count(disk.writes)}`],
        ['write errors', disk.write_errors ? fmt.count(disk.write_errors) : null],
        ['write queue', disk.queue_capacity_bytes ? `${fmt.bytes(disk.queue_bytes)} of ${fmt.bytes(disk.queue_capacity_bytes)}` : null],
      ], disk.enabled ? '' : 'Not configured (--cache-disk-path).'),
    tierCard('shared', 'Shared', 'a Valkey server other prefixd servers also use', !!remote.enabled, null, [
      ['mode', remote.cluster === undefined ? null : remote.cluster ? 'cluster' : 'single server'],
      ['hits', fmt.count(remote.hits)],
      ['lookups · usable', remote.lookups === undefined ? null : `${fmt.count(remote.lookups)} · ${fmt.count(remote.lookup_hits)}`],
      ['timeouts · errors', remote.lookup_timeouts === undefined ? null : `${fmt.count(remote.lookup_timeouts)} · ${fmt.count(remote.errors)}`],
      ['mean lookup', remote.lookup_seconds_mean ? fmt.seconds(remote.lookup_seconds_mean) : null],
      ['writes', remote.writes === undefined ? null : fmt.count(remote.writes)],
    ], remote.enabled ? '' : 'Not configured (--cache-remote).'),
  ];
  return cards;
}

function tierCard(tier, title, subtitle, on, meterView, rows, note = '') {
  const shown = on ? rows.filter(([, value]) => value !== null && value !== undefined) : [];
  return el('article', { class: on ? 'tier-card' : 'tier-card off', 'data-tier': tier },
    el('header', {}, el('h3', { text: title }), el('span', { class: on ? 'tier-state on' : 'tier-state', text: on ? 'on' : 'off' })),
    el('p', { class: 'tier-subtitle', text: subtitle }),
    on ? meterView : null,
    shown.length ? el('dl', {}, shown.flatMap(([label, value]) => [el('dt', { text: label }), el('dd', { text: value })])) : null,
    note ? el('p', { class: 'tier-note', text: note }) : null);
}

function meter(used, total, label) {
  if (!(total > 0) || typeof used !== 'number') return null;
  const fraction = Math.min(1, used / total);
  return el('div', { class: 'meter', title: `${fmt.percent(fraction, 1)} ${label}`, role: 'img', 'aria-label': `${fmt.percent(fraction, 1)} ${label}` },
    el('div', { class: 'meter-fill', style: `width: ${(fraction * 100).toFixed(1)}%` }));
}

function withMax(value, max, unit = '') {
  if (value === undefined) return null;
  return typeof max === 'number' && max > 0 ? `${fmt.count(value)} of ${fmt.count(max)}${unit ? ` ${unit}` : ''}` : fmt.count(value);
}

function table(node, headers, rows, emptyText) {
  const head = el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col', text: h }))));
  const body = el('tbody', {}, rows.length
    ? rows.map((cells) => el('tr', {}, cells.map((c) => el('td', { text: c ?? '—' }))))
    : el('tr', {}, el('td', { class: 'empty-row', colspan: headers.length, text: emptyText })));
  node.replaceChildren(head, body);
}

export function renderTenants(node, s) {
  const views = s.tenants ? Object.entries(s.tenants) : s.tenant ? [[s.tenant, s]] : [];
  table(node, ['Tenant', 'Hits', 'Misses', 'Tokens reused', 'Device cells', 'Host tokens', 'Checkpoints', 'Disk tokens', 'Bytes'],
    views.map(([id, t]) => [
      id.startsWith('scope:') ? `${id} (removed)` : id,
      fmt.count(t.hits), fmt.count(t.misses), fmt.count(t.tokens_reused),
      fmt.count(t.tiers?.device?.cells), fmt.count(t.tiers?.host?.tokens), fmt.count(t.snapshots?.entries),
      t.tiers?.disk?.enabled ? fmt.count(t.tiers.disk.tokens) : 'off', fmt.bytes(t.bytes),
    ]), 'No tenant has cached anything yet.');
}

// Control-plane keys (POST /v1/cache/set). key_list has each key's numbers; a server without
// it still names its keys in meta_by_key.
export function renderKeys(node, note, s) {
  const headers = ['Key', 'Tokens', 'TTL', 'Idle', 'Expires in', 'Created', 'Forked from', 'Meta'];
  let rows;
  if (Array.isArray(s.key_list)) {
    note.hidden = true;
    rows = s.key_list.map((k) => [
      k.name, fmt.count(k.tokens),
      k.ttl_seconds === null || k.ttl_seconds === undefined ? 'cache TTL' : fmt.seconds(k.ttl_seconds),
      fmt.seconds(k.idle_seconds),
      k.expires_in_seconds === null || k.expires_in_seconds === undefined ? 'no TTL' : fmt.seconds(k.expires_in_seconds),
      k.created_unix_ms ? new Date(k.created_unix_ms).toLocaleString('en-GB') : '—',
      k.forked_from || '—',
      metaText(k.meta),
    ]);
  } else {
    const names = Object.keys(s.meta_by_key ?? {});
    note.textContent = 'These stats list key names and metadata only.';
    note.hidden = names.length === 0;
    rows = names.map((name) => [name, '—', '—', '—', '—', '—', '—', metaText(s.meta_by_key[name])]);
  }
  table(node, headers, rows, 'No keys. POST /v1/cache/set creates one.');
}

function metaText(meta) {
  if (!meta || (typeof meta === 'object' && !Object.keys(meta).length)) return '—';
  const text = JSON.stringify(meta);
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

// The stats count sessions but do not name them; the tree's nodes do.
export function renderSessions(node, data) {
  const sessions = new Map();
  const visit = (ns, n) => {
    for (const id of n.sessions ?? []) {
      const key = `${ns.namespace}\n${id}`;
      const seen = sessions.get(key) ?? { id, tenant: ns.tenant, tokens: 0, nodes: 0, lastUsed: null };
      seen.tokens = Math.max(seen.tokens, n.end);
      seen.nodes += 1;
      if (typeof n.last_used_seconds_ago === 'number') seen.lastUsed = Math.min(seen.lastUsed ?? Infinity, n.last_used_seconds_ago);
      sessions.set(key, seen);
    }
    for (const child of n.children ?? []) visit(ns, child);
  };
  for (const ns of data?.namespaces ?? []) if (ns.root) visit(ns, ns.root);
  const rows = [...sessions.values()].sort((a, b) => b.tokens - a.tokens)
    .map((s) => [s.id, s.tenant, fmt.count(s.tokens), fmt.count(s.nodes), s.lastUsed === null ? '—' : fmt.ago(s.lastUsed)]);
  table(node, ['Session', 'Tenant', 'Deepest token', 'Nodes', 'Last use'], rows,
    data ? 'No named sessions (prompt_cache_key or user) in the tree.' : 'No tree yet.');
}
