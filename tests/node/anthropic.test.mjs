// The official `@anthropic-ai/sdk` client against prefixd's Messages API: if this passes, agents
// written for Anthropic's API run against prefixd unchanged. Started by run.sh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

const model = process.env.PREFIXD_MODEL_ID;
// The SDK adds /v1/messages itself.
const baseURL = process.env.PREFIXD_BASE_URL?.replace(/\/v1$/, '');
assert.ok(baseURL && model, 'run this through tests/node/run.sh');

// maxRetries 0: a retried request would hide a server error behind a later success.
const client = new Anthropic({ baseURL, apiKey: 'not-checked', maxRetries: 0, timeout: 60_000 });
const system = 'You are a terse weather agent. You answer in one short sentence and call tools when asked.';
const messages = [{ role: 'user', content: 'Say hello.' }];
const tools = [{
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', enum: ['Oslo', 'Rome', 'Lima'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    required: ['city', 'days'],
    additionalProperties: false,
  },
}];

test('messages.create: a text reply with usage that adds up to count_tokens', async () => {
  const m = await client.messages.create({ model, system, messages, max_tokens: 8, temperature: 0 });
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.content[0].type, 'text');
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
  const counted = await client.messages.countTokens({ model, system, messages });
  const u = m.usage;
  assert.equal(u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens, counted.input_tokens);
  assert.ok(u.output_tokens > 0 && u.output_tokens <= 8);
});

test('messages.stream: the events assemble the same message, usage included', async () => {
  const request = { model, system, messages, max_tokens: 10, temperature: 0 };
  const whole = await client.messages.create(request);
  const stream = client.messages.stream(request);
  let text = '';
  stream.on('text', (delta) => { text += delta; });
  const final = await stream.finalMessage();
  assert.equal(text, whole.content[0].text);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  // The second request read the first one's prompt back (all but the last token).
  assert.ok(final.usage.cache_read_input_tokens > 0);
});

test('tools: a forced call comes back as a tool_use block, and its result continues the turn', async () => {
  const first = await client.messages.create({
    model, system, tools, max_tokens: 120, tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [{ role: 'user', content: 'Weather in Oslo for three days?' }], metadata: { user_id: 'agent-1' },
  });
  assert.equal(first.stop_reason, 'tool_use');
  const call = first.content.find((block) => block.type === 'tool_use');
  assert.ok(call, JSON.stringify(first.content));
  assert.equal(call.name, 'get_weather');
  assert.ok(['Oslo', 'Rome', 'Lima'].includes(call.input.city));
  assert.ok(call.input.days >= 1 && call.input.days <= 7);
  const next = await client.messages.create({
    model, system, tools, max_tokens: 4, metadata: { user_id: 'agent-1' },
    messages: [
      { role: 'user', content: 'Weather in Oslo for three days?' },
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'rain, 9 C' }] },
    ],
  });
  // The call was cached as this request renders it: only the result and its scaffolding are new.
  assert.ok(next.usage.input_tokens < 40, JSON.stringify(next.usage));
  assert.ok(next.usage.cache_read_input_tokens > first.usage.input_tokens, JSON.stringify(next.usage));
});

test('errors: the SDK raises its own classes', async () => {
  await assert.rejects(client.messages.create({ model: 'no-such-model', messages, max_tokens: 4 }), Anthropic.NotFoundError);
  await assert.rejects(client.messages.create({ model, messages: [], max_tokens: 4 }), Anthropic.BadRequestError);
  await assert.rejects(
    client.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }),
    (err) => err instanceof Anthropic.BadRequestError && /image/.test(err.message));
});
