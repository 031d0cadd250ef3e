// The chat page: one conversation held in memory, streamed from /v1/chat/completions, with
// what the prompt cache did for each reply shown under it.

import { apiFetch, ApiError, getJson, readEvents } from './api.js';
import { el } from './dom.js';
import * as fmt from './format.js';

const SETTINGS_STORE = 'prefixd.chatSettings';
const NUMBER_FIELDS = [
  // [input id, request field, parse]
  ['temperature', 'temperature', Number.parseFloat],
  ['top-p', 'top_p', Number.parseFloat],
  ['max-tokens', 'max_tokens', (v) => Number.parseInt(v, 10)],
  ['seed', 'seed', (v) => Number.parseInt(v, 10)],
];

export function mountChat(root) {
  let history = []; // the messages sent back with every turn, system prompt excluded
  let controller = null; // the running reply's, while one streams
  let modelId = null;

  const messages = el('div', { id: 'messages', class: 'messages' });
  const empty = el('p', { class: 'empty-chat', text: 'Send a message to start. Replies stream in as they are generated; under each one, what the prompt cache reused.' });
  messages.append(empty);
  const input = el('textarea', { id: 'chat-input', rows: 3, placeholder: 'Message (Enter sends, Shift+Enter starts a new line)' });
  const send = el('button', { id: 'chat-send', type: 'submit', class: 'primary', text: 'Send' });
  const stop = el('button', { id: 'chat-stop', type: 'button', text: 'Stop', hidden: true });
  const newChat = el('button', { id: 'chat-new', type: 'button', text: 'New chat' });
  const composer = el('form', { class: 'composer' }, input, el('div', { class: 'composer-actions' }, newChat, el('span', { class: 'spacer' }), stop, send));

  const settings = settingsPanel();
  root.append(el('div', { class: 'chat-layout' }, el('section', { class: 'conversation' }, messages, composer), settings.panel));

  const models = getJson('/v1/models').then((list) => {
    modelId = list?.data?.[0]?.id ?? null;
    document.getElementById('model-name').textContent = modelId ? `model ${modelId}` : '';
  });
  models.catch((err) => addError(messages, `Could not read the model list: ${err.message}`));

  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });
  composer.addEventListener('submit', (event) => {
    event.preventDefault();
    sendTurn();
  });
  stop.addEventListener('click', () => controller?.abort());
  newChat.addEventListener('click', () => {
    controller?.abort();
    // A new array: the reply being stopped then lands in the old conversation, not this one.
    history = [];
    messages.replaceChildren(empty);
    input.focus();
  });
  input.focus();

  async function sendTurn() {
    if (controller) return;
    const text = input.value.trim();
    if (!text) return;
    const params = settings.read();
    if (!params) return; // the tools field is not valid JSON; the panel says so

    empty.remove();
    input.value = '';
    const turns = history;
    const turn = { role: 'user', content: text };
    turns.push(turn);
    const userView = el('article', { class: 'message user-message' }, el('div', { class: 'message-role', text: 'you' }), el('div', { class: 'message-content', text }));
    messages.append(userView);
    const reply = new ReplyView();
    messages.append(reply.element);
    reply.element.scrollIntoView({ block: 'end' });

    controller = new AbortController();
    send.disabled = true;
    stop.hidden = false;
    try {
      await models.catch(() => {});
      const body = {
        ...(modelId ? { model: modelId } : {}),
        messages: [...(params.system ? [{ role: 'system', content: params.system }] : []), ...turns],
        stream: true,
        stream_options: { include_usage: true },
        ...params.fields,
      };
      const result = await streamReply(body, reply, controller.signal);
      turns.push(reply.message());
      reply.finish(result);
    } catch (err) {
      if (err.name === 'AbortError') {
        // What arrived before Stop stays in the conversation, as a reply cut short.
        if (reply.content || reply.toolCalls.length) turns.push(reply.message());
        reply.finish({ stopped: true });
      } else if (reply.content || reply.toolCalls.length) {
        turns.push(reply.message());
        reply.finish({ failed: true });
        addError(messages, err.message);
      } else {
        // Nothing was answered: the turn leaves the conversation and its text goes back to the
        // input box, to send again or edit.
        turns.splice(turns.indexOf(turn), 1);
        userView.remove();
        reply.element.remove();
        if (!input.value) input.value = text;
        addError(messages, err.message);
      }
    } finally {
      controller = null;
      send.disabled = false;
      stop.hidden = true;
      messages.lastElementChild?.scrollIntoView({ block: 'end' });
    }
  }
}

async function streamReply(body, reply, signal) {
  const started = performance.now();
  const response = await apiFetch('/v1/chat/completions', { method: 'POST', body, signal });
  if (!response.ok) throw await ApiError.from(response);
  const result = { usage: null, cache: null, timings: null, ttftMs: null, finish: null };
  let ended = false;
  // Read on past [DONE] to the end of the body: cancelling there would cut the response short
  // for the browser's network log (and for proxies that wait for the whole body).
  for await (const data of readEvents(response)) {
    if (data === '[DONE]') ended = true;
    if (ended) continue;
    let chunk;
    try {
      chunk = JSON.parse(data);
    } catch {
      throw new ApiError(`The stream sent something that is not JSON: ${data.slice(0, 80)}`);
    }
    // A failure after the status line was sent arrives as an error event.
    if (chunk.error) throw new ApiError(chunk.error.message ?? 'The server ended the reply with an error');
    if (chunk.usage) result.usage = chunk.usage;
    if (chunk.prompt_cache) result.cache = chunk.prompt_cache;
    if (chunk.timings) result.timings = chunk.timings;
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta ?? {};
      if (delta.content || delta.reasoning_content || delta.tool_calls?.length) {
        result.ttftMs ??= performance.now() - started;
      }
      followingEnd(() => {
        if (delta.reasoning_content) reply.addReasoning(delta.reasoning_content);
        if (delta.content) reply.addContent(delta.content);
        for (const call of delta.tool_calls ?? []) reply.addToolCall(call);
      });
      if (choice.finish_reason) result.finish = choice.finish_reason;
    }
  }
  return result;
}

// A reader at the end of the page stays there as the reply grows; one who scrolled up to read
// is left where they are.
function followingEnd(change) {
  const page = document.documentElement;
  const atEnd = window.innerHeight + window.scrollY >= page.scrollHeight - 80;
  change();
  if (atEnd) window.scrollTo(0, page.scrollHeight);
}

// One assistant message while it streams and after. The data-* attributes it ends with are what
// the browser test (and anyone scripting the page) reads.
class ReplyView {
  constructor() {
    this.content = '';
    this.toolCalls = [];
    this.toolViews = [];
    this.text = document.createTextNode('');
    this.contentBox = el('div', { class: 'message-content' }, this.text);
    this.element = el('article', { class: 'message assistant-message streaming' }, el('div', { class: 'message-role', text: 'assistant' }), this.contentBox);
    this.reasoning = null;
    this.toolBox = null;
  }

  addContent(delta) {
    this.content += delta;
    this.text.appendData(delta);
  }

  addReasoning(delta) {
    if (!this.reasoning) {
      this.reasoningText = document.createTextNode('');
      this.reasoning = el('details', { class: 'reasoning' }, el('summary', { text: 'Reasoning' }), el('div', { class: 'reasoning-text' }, this.reasoningText));
      this.contentBox.before(this.reasoning);
    }
    this.reasoningText.appendData(delta);
  }

  // Tool calls stream in pieces keyed by index: the id and name come first, the arguments then
  // arrive as fragments of a JSON string.
  addToolCall(piece) {
    const index = piece.index ?? this.toolCalls.length;
    let call = this.toolCalls[index];
    let view = this.toolViews[index];
    if (!call) {
      call = this.toolCalls[index] = { id: '', type: 'function', function: { name: '', arguments: '' } };
      if (!this.toolBox) {
        this.toolBox = el('div', { class: 'tool-calls' });
        this.contentBox.after(this.toolBox);
      }
      view = this.toolViews[index] = { name: el('span', { class: 'tool-call-name' }), args: el('pre', { class: 'tool-call-args' }) };
      this.toolBox.append(el('div', { class: 'tool-call' }, el('span', { class: 'tool-call-label', text: 'tool call' }), view.name, view.args));
    }
    if (piece.id) call.id = piece.id;
    if (piece.function?.name) call.function.name += piece.function.name;
    if (piece.function?.arguments) call.function.arguments += piece.function.arguments;
    view.name.textContent = call.function.name || '(unnamed)';
    view.args.textContent = call.function.arguments;
  }

  // The reply as the next request sends it back. Reasoning stays out: chat templates commonly
  // drop it from earlier turns.
  message() {
    const message = { role: 'assistant', content: this.content };
    const calls = this.toolCalls.filter(Boolean);
    if (calls.length) message.tool_calls = calls;
    return message;
  }

  finish({ usage = null, cache = null, timings = null, ttftMs = null, stopped = false, failed = false, finish = null }) {
    const e = this.element;
    e.classList.remove('streaming');
    if (this.reasoning && !this.content) this.reasoning.open = true;
    const prompt = usage?.prompt_tokens ?? null;
    const cached = cache?.cached_tokens ?? usage?.prompt_tokens_details?.cached_tokens ?? null;
    const computed = cache?.fed_tokens ?? null;
    const tier = cache ? (cache.tier ?? 'none') : null;
    const saved = typeof cache?.seconds_saved === 'number' ? cache.seconds_saved : null;
    const ttft = ttftMs === null ? null : Math.round(ttftMs);
    e.dataset.promptTokens = prompt ?? '';
    e.dataset.cachedTokens = cached ?? '';
    e.dataset.computedTokens = computed ?? '';
    e.dataset.tier = tier ?? '';
    e.dataset.ttftMs = ttft ?? '';
    e.dataset.secondsSaved = saved ?? '';
    e.dataset.outcome = cache?.outcome ?? '';
    // Speculative decoding (--spec-type): the draft tokens verified and those the model drew too.
    const drafted = typeof timings?.draft_n === 'number' ? timings.draft_n : null;
    e.dataset.draftTokens = drafted ?? '';
    e.dataset.draftAccepted = drafted === null ? '' : timings.draft_n_accepted;
    if (stopped || failed) e.dataset.stopped = 'true';

    const parts = [];
    if (prompt !== null) parts.push(`prompt ${fmt.count(prompt)} tokens`);
    if (cached !== null) parts.push(`${fmt.count(cached)} cached${tier && tier !== 'none' ? ` (${tier})` : ''}`);
    if (computed !== null) parts.push(`${fmt.count(computed)} computed`);
    if (ttft !== null) parts.push(`TTFT ${fmt.count(ttft)} ms`);
    if (saved !== null) parts.push(`saved ${fmt.seconds(saved)}`);
    if (cache?.outcome) parts.push(`cache ${cache.outcome.replace('_', ' ')}`);
    if (drafted) parts.push(`drafts ${fmt.count(timings.draft_n_accepted)} of ${fmt.count(drafted)} accepted`);
    if (stopped) parts.push('stopped');
    else if (failed) parts.push('cut short by an error');
    else if (finish === 'length') parts.push('cut at max tokens');
    if (parts.length) {
      const stats = el('div', { class: 'message-stats' }, el('span', { class: 'stats-line', text: parts.join(' · ') }));
      if (prompt) {
        const fraction = Math.min(1, (cached ?? 0) / prompt);
        stats.append(el('div', { class: 'cache-bar', title: `${fmt.percent(fraction)} of the prompt came from the cache`, role: 'img', 'aria-label': `${fmt.percent(fraction)} of the prompt cached` },
          el('div', { class: 'cache-bar-fill', style: `width: ${(fraction * 100).toFixed(1)}%` })));
      }
      e.append(stats);
    }
    e.dataset.done = 'true';
  }
}

function addError(messages, text) {
  messages.querySelector('.empty-chat')?.remove();
  const node = el('div', { class: 'message error-message', role: 'alert' }, el('div', { class: 'message-role', text: 'error' }), el('div', { class: 'message-content', text }));
  messages.append(node);
  node.scrollIntoView({ block: 'end' });
}

// The settings panel, kept in localStorage so that a reload keeps them. read() gives the request
// fields (empty ones are left to the server) or null when the tools JSON is wrong.
function settingsPanel() {
  const saved = loadSettings();
  const field = (id, label, attrs = {}) => {
    const input = el('input', { id, name: id, type: 'number', inputmode: 'decimal', ...attrs });
    input.value = saved[id] ?? '';
    return el('label', { class: 'field' }, el('span', { text: label }), input);
  };
  const system = el('textarea', { id: 'system-prompt', rows: 6, placeholder: 'None' });
  system.value = saved['system-prompt'] ?? '';
  const tools = el('textarea', { id: 'tools', rows: 5, spellcheck: 'false', placeholder: '[{"type": "function", "function": {"name": "…", "parameters": {…}}}]' });
  tools.value = saved.tools ?? '';
  const toolsError = el('p', { id: 'tools-error', class: 'field-error', role: 'alert', hidden: true });

  const panel = el('aside', { class: 'settings' },
    el('h2', { text: 'Settings' }),
    el('label', { class: 'field' }, el('span', { text: 'System prompt' }), system),
    el('div', { class: 'field-grid' },
      field('temperature', 'Temperature', { min: 0, max: 2, step: 0.1, placeholder: 'default' }),
      field('top-p', 'Top p', { min: 0, max: 1, step: 0.05, placeholder: 'default' }),
      field('max-tokens', 'Max tokens', { min: 1, step: 1, placeholder: 'default', inputmode: 'numeric' }),
      field('seed', 'Seed', { step: 1, placeholder: 'random', inputmode: 'numeric' })),
    el('label', { class: 'field' }, el('span', { text: 'Tools (an OpenAI tools array, JSON)' }), tools),
    toolsError,
    el('p', { class: 'hint', text: 'Empty fields are not sent: the server uses its defaults. Changing the system prompt or tools changes the prompt from its start, so the next turn reuses less of the cache.' }));

  panel.addEventListener('input', () => {
    const values = {};
    for (const input of panel.querySelectorAll('input, textarea')) values[input.id] = input.value;
    try {
      localStorage.setItem(SETTINGS_STORE, JSON.stringify(values));
    } catch {
      // Without storage the settings last as long as the page.
    }
    toolsError.hidden = true;
  });

  function read() {
    const fields = {};
    for (const [id, name, parse] of NUMBER_FIELDS) {
      const raw = panel.querySelector(`#${id}`).value.trim();
      if (raw === '') continue;
      const value = parse(raw);
      if (Number.isFinite(value)) fields[name] = value;
    }
    const toolsText = tools.value.trim();
    if (toolsText) {
      let parsed;
      try {
        parsed = JSON.parse(toolsText);
      } catch (err) {
        return showToolsError(`Tools is not valid JSON: ${err.message}`);
      }
      if (!Array.isArray(parsed)) return showToolsError('Tools must be a JSON array of tool objects.');
      if (parsed.length) fields.tools = parsed;
    }
    toolsError.hidden = true;
    return { system: system.value.trim() ? system.value : '', fields };
  }

  function showToolsError(text) {
    toolsError.textContent = text;
    toolsError.hidden = false;
    tools.focus();
    return null;
  }

  return { panel, read };
}

function loadSettings() {
  try {
    return JSON.parse(localStorage.getItem(SETTINGS_STORE) ?? '{}') ?? {};
  } catch {
    return {};
  }
}
