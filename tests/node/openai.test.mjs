// The official `openai` client against prefixd: if this passes, applications written for OpenAI
// work unchanged. Started by run.sh, which provides PREFIXD_BASE_URL and PREFIXD_MODEL_ID.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.PREFIXD_BASE_URL;
const model = process.env.PREFIXD_MODEL_ID;
assert.ok(baseURL && model, 'run this through tests/node/run.sh');

// maxRetries 0: a retried request would hide a server error behind a later success.
const client = new OpenAI({ baseURL, apiKey: 'not-checked', maxRetries: 0, timeout: 60_000 });
const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say hello.' },
];

test('chat completion: text and usage', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  // prefixd's extension rides along untouched.
  assert.equal(typeof r.prompt_cache.outcome, 'string');
});

test('streaming chat: deltas add up to the non-streamed text, usage at the end', async () => {
  const request = { model, messages, max_tokens: 10, temperature: 0 };
  const whole = await client.chat.completions.create(request);
  const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta?.role) role = choice.delta.role;
      if (choice.delta?.content) text += choice.delta.content;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);
});

test('the stream helper assembles a final completion', async () => {
  const runner = client.chat.completions.stream({ model, messages, max_tokens: 6, temperature: 0 });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.role, 'assistant');
  assert.equal(typeof final.choices[0].message.content, 'string');
});

test('completions: text prompt and token-id prompt', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6, temperature: 0 });
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.usage.completion_tokens <= 6);

  const ids = await client.completions.create({ model, prompt: [1, 2, 3, 4], max_tokens: 2 });
  assert.equal(ids.usage.prompt_tokens, 4);
});

test('streaming completions end with a finish reason', async () => {
  const stream = await client.completions.create({ model, prompt: 'Hello', max_tokens: 5, temperature: 0, stream: true });
  let finish = null;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) if (choice.finish_reason) finish = choice.finish_reason;
  }
  assert.ok(['stop', 'length'].includes(finish));
});

test('models.list and models.retrieve', async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), [model]);
  assert.equal(page.data[0].owned_by, 'prefixd');
  const one = await client.models.retrieve(model);
  assert.equal(one.id, model);
});

test('invalid temperature is a 400 APIError naming the parameter', async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages, temperature: 5 }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.status, 400);
      assert.equal(err.param, 'temperature');
      assert.equal(err.type, 'invalid_request_error');
      return true;
    },
  );
});

test('an unknown model is a 404 NotFoundError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages, max_tokens: 2 }),
    (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal(err.code, 'model_not_found');
      return true;
    },
  );
});
