// Every call to the prefixd API goes through apiFetch, so that one place knows the key: it adds
// the Authorization header, and a 401 opens the key form and sends the request again once a key
// is entered. A server without keys never answers 401, so the form never shows there.

const KEY_STORE = 'prefixd.apiKey';

export class ApiError extends Error {
  constructor(message, status = 0) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }

  // prefixd answers errors as {"error": {"message", "type", "code"}}; a proxy in front of it may
  // answer with plain text or HTML, so fall back to the status line.
  static async from(response) {
    const text = await response.text().catch(() => '');
    let message = '';
    try {
      const body = JSON.parse(text);
      message = body?.error?.message ?? body?.message ?? '';
    } catch {
      message = text.length < 300 ? text.trim() : '';
    }
    const status = `${response.status} ${response.statusText}`.trim();
    return new ApiError(message ? `${message} (${status})` : `The server answered ${status}`, response.status);
  }
}

function readKey() {
  try {
    return localStorage.getItem(KEY_STORE) ?? '';
  } catch {
    return '';
  }
}

function writeKey(key) {
  try {
    if (key) localStorage.setItem(KEY_STORE, key);
    else localStorage.removeItem(KEY_STORE);
  } catch {
    // Storage can be off (private windows); the key then lasts until the page is left.
  }
  sessionKey = key;
  showForgetButton();
}

let sessionKey = readKey();

// Several calls can meet a 401 at once (the cache page polls two endpoints): they all wait on
// the same form.
let keyPromise = null;

function askForKey(rejectedKey) {
  if (keyPromise) return keyPromise;
  keyPromise = new Promise((resolve) => {
    const form = document.getElementById('api-key-form');
    const input = document.getElementById('api-key');
    const note = document.getElementById('api-key-note');
    note.textContent = rejectedKey
      ? 'The server did not accept the stored key. Enter another one.'
      : 'Requests are refused until a key is entered. It is kept in this browser only.';
    form.hidden = false;
    input.value = '';
    input.focus();
    form.onsubmit = (event) => {
      event.preventDefault();
      const key = input.value.trim();
      if (!key) return;
      writeKey(key);
      form.hidden = true;
      form.onsubmit = null;
      keyPromise = null;
      resolve();
    };
  });
  return keyPromise;
}

function showForgetButton() {
  const button = document.getElementById('key-forget');
  if (button) button.hidden = !sessionKey;
}

export function initKeyControls() {
  showForgetButton();
  document.getElementById('key-forget')?.addEventListener('click', () => {
    writeKey('');
    location.reload();
  });
}

// fetch with the key. Resolves with the response for any status but 401; rejects only as fetch
// does (network failure, abort).
export async function apiFetch(path, { method = 'GET', body, signal } = {}) {
  for (;;) {
    const key = sessionKey;
    const headers = { Accept: 'application/json' };
    if (key) headers.Authorization = `Bearer ${key}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    if (response.status !== 401) return response;
    await response.body?.cancel().catch(() => {});
    // Another call may have got a key while this one was on its way.
    if (sessionKey === key) await askForKey(key);
  }
}

export async function getJson(path) {
  const response = await apiFetch(path);
  if (!response.ok) throw await ApiError.from(response);
  return response.json();
}

// The data fields of a server-sent event stream, one string per event. EventSource cannot POST
// or send headers, hence this reader over fetch's body.
export async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  const boundary = /\r?\n\r?\n/g;
  let buffer = '';
  let complete = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let start = 0;
      boundary.lastIndex = 0;
      for (let match; (match = boundary.exec(buffer)); start = boundary.lastIndex) {
        const data = eventData(buffer.slice(start, match.index));
        if (data !== null) yield data;
      }
      buffer = buffer.slice(start);
    }
    complete = true;
    const data = eventData(buffer);
    if (data !== null) yield data;
  } finally {
    // A reader that stops early (an error, Stop) closes the connection rather than leave it open.
    if (!complete) reader.cancel().catch(() => {});
  }
}

// Joins an event's data lines; comments (": keep-alive") and other fields carry nothing here.
function eventData(block) {
  const lines = [];
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith('data:')) lines.push(line.slice(line.startsWith('data: ') ? 6 : 5));
  }
  return lines.length ? lines.join('\n') : null;
}
