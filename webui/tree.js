// The radix tree of cached prefixes from GET /v1/cache/tree, as nested <details>: each node is
// a span of tokens that some cached sequences share; its children are where they diverge.
// The tree is rebuilt on every refresh, so which nodes are open is kept apart, keyed by
// namespace and token span (a span is stable while the node exists).

import { el } from './dom.js';
import * as fmt from './format.js';

const OPEN_BY_DEFAULT_DEPTH = 2; // namespaces and the first level under them

export class TreeView {
  constructor(container) {
    this.container = container;
    this.openState = new Map(); // key → open, for nodes the user has toggled
    this.renders = 0;
    // A click on a summary (or Enter on it) is the user's; toggle events also fire for nodes
    // built open, so they cannot tell. The click comes before the node flips.
    container.addEventListener('click', (event) => {
      const details = event.target.closest('summary')?.parentElement;
      const key = details?.dataset.key;
      if (!key || !container.contains(details)) return;
      if (details.classList.contains('leaf')) event.preventDefault(); // nothing to open
      else this.openState.set(key, !details.open);
    });
  }

  showMessage(text) {
    this.container.replaceChildren(el('p', { class: 'tree-message', text }));
    this.finishRender();
  }

  render(data) {
    const namespaces = data?.namespaces ?? [];
    if (!namespaces.length) {
      this.showMessage('The cache holds nothing yet: send a chat message and refresh.');
      return;
    }
    const parts = namespaces.map((ns) => this.namespaceView(ns));
    if (data.truncated) {
      parts.unshift(el('p', { class: 'tree-message', text: `The tree has more nodes than the server lists (node_limit ${fmt.count(data.node_limit)}); the rest are left out.` }));
    }
    this.container.replaceChildren(...parts);
    this.finishRender();
  }

  finishRender() {
    this.renders += 1;
    this.container.dataset.renders = String(this.renders);
  }

  namespaceView(ns) {
    const key = `ns:${ns.namespace}`;
    const details = el('details', { class: 'tree-namespace', 'data-key': key, open: this.isOpen(key, 0) },
      el('summary', {},
        el('span', { class: 'tree-title', text: `namespace ${ns.namespace}` }),
        badge(`tenant ${ns.tenant}`),
        el('span', { class: 'tree-meta', text: `${fmt.counted(ns.tokens, 'token')} · ${fmt.counted(ns.nodes, 'node')}` })));
    const children = ns.root?.children ?? [];
    if (!children.length) details.append(el('p', { class: 'tree-message', text: 'No cached prefixes.' }));
    for (const child of children) details.append(this.nodeView(ns.namespace, child, 1));
    return details;
  }

  nodeView(namespace, node, depth) {
    const key = `${namespace}:${node.begin}:${node.end}`;
    const children = node.children ?? [];
    const leaf = children.length === 0;
    const preview = (node.text ?? '').replace(/\r?\n/g, '↵');
    const summary = el('summary', {},
      el('span', { class: 'tree-span', title: 'token positions [begin, end)', text: `[${node.begin}, ${node.end})` }),
      el('span', { class: 'tree-tokens', text: `${fmt.count(node.tokens)} tok` }),
      el('span', { class: 'tree-text', title: node.text ?? '', text: preview || '(empty)' }),
      el('span', { class: 'tree-badges' },
        (node.tiers ?? []).map((tier) => badge(tier, `tier-${tier}`)),
        node.locked ? badge('locked', 'locked') : null),
      el('span', { class: 'tree-meta', text: nodeMeta(node) }));
    const details = el('details', {
      class: leaf ? 'tree-node leaf' : 'tree-node',
      'data-key': key,
      'data-begin': node.begin,
      'data-end': node.end,
      open: !leaf && this.isOpen(key, depth),
    }, summary);
    for (const child of children) details.append(this.nodeView(namespace, child, depth + 1));
    return details;
  }

  isOpen(key, depth) {
    return this.openState.get(key) ?? depth < OPEN_BY_DEFAULT_DEPTH;
  }
}

function nodeMeta(node) {
  const parts = [`${fmt.count(node.entries)} ${node.entries === 1 ? 'entry' : 'entries'}`];
  const sessions = node.sessions ?? [];
  if (sessions.length) parts.push(`${sessions.length === 1 ? 'session' : 'sessions'} ${sessions.join(', ')}`);
  parts.push(`used ${fmt.ago(node.last_used_seconds_ago)}`);
  return parts.join(' · ');
}

function badge(text, kind = '') {
  return el('span', { class: kind ? `badge ${kind}` : 'badge', text });
}
