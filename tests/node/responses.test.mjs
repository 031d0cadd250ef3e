// The official `openai` client's Responses API against prefixd: create, stream, function calls,
// previous_response_id and json_schema output. Started by run.sh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.PREFIXD_BASE_URL;
const model = process.env.PREFIXD_MODEL_ID;
assert.ok(baseURL && model, 'run this through tests/node/run.sh');

const client = new OpenAI({ baseURL, apiKey: 'not-checked', maxRetries: 0, timeout: 60_000 });
const instructions = 'You are a terse weather agent. Answer every question about the weather in one sentence.';
const tools = [{
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Oslo', 'Rome', 'Lima'] } }, required: ['city'], additionalProperties: false },
  strict: true,
}];

test('responses.create: output_text and usage; a continuation by id reads the conversation from the cache', async () => {
  const first = await client.responses.create({ model, instructions, input: 'What is the weather like in Rome this week?', max_output_tokens: 6, temperature: 0 });
  assert.match(first.id, /^resp_/);
  assert.equal(first.object, 'response');
  assert.equal(typeof first.output_text, 'string');
  assert.ok(first.usage.input_tokens > 0);
  const next = await client.responses.create({ model, instructions, previous_response_id: first.id, input: 'And tomorrow?', max_output_tokens: 4, temperature: 0 });
  assert.equal(next.previous_response_id, first.id);
  assert.ok(next.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens, JSON.stringify(next.usage));
  const stored = await client.responses.retrieve(first.id);
  assert.equal(stored.id, first.id);
  const deleted = await client.responses.delete(first.id);
  assert.equal(deleted?.deleted ?? true, true);
  await assert.rejects(client.responses.retrieve(first.id), OpenAI.NotFoundError);
});

test('responses.stream: the events assemble the same text as the whole response', async () => {
  const request = { model, instructions, input: 'Is it raining in Oslo?', max_output_tokens: 8, temperature: 0 };
  const whole = await client.responses.create(request);
  const stream = client.responses.stream(request);
  let text = '';
  let ended = null;
  stream.on('response.output_text.delta', (event) => { text += event.delta; });
  // A reply cut at max_output_tokens ends with response.incomplete, which the SDK passes through.
  stream.on('response.completed', (event) => { ended = event.response; });
  stream.on('response.incomplete', (event) => { ended = event.response; });
  const final = await stream.finalResponse();
  assert.equal(text, whole.output_text);
  assert.equal(final.output[0].content[0].text, whole.output_text);
  assert.equal(ended.status, whole.status);
  assert.equal(ended.usage.output_tokens, whole.usage.output_tokens);
});

test('function calls: a forced call, answered by its output through previous_response_id', async () => {
  const first = await client.responses.create({ model, instructions, tools, tool_choice: 'required', parallel_tool_calls: false, input: 'Weather in Oslo?', max_output_tokens: 100 });
  const call = first.output.find((item) => item.type === 'function_call');
  assert.ok(call, JSON.stringify(first.output));
  assert.equal(call.name, 'get_weather');
  assert.ok(['Oslo', 'Rome', 'Lima'].includes(JSON.parse(call.arguments).city));
  const next = await client.responses.create({
    model, instructions, tools, previous_response_id: first.id, max_output_tokens: 4,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'rain, 9 C' }],
  });
  // The call was cached as this request renders it: only the output and its scaffolding are new.
  assert.ok(next.usage.input_tokens - next.usage.input_tokens_details.cached_tokens < 40, JSON.stringify(next.usage));
});

test('text.format json_schema: the output validates', async () => {
  const r = await client.responses.create({
    model, input: 'Pick a city.', max_output_tokens: 60,
    text: { format: { type: 'json_schema', name: 'pick', strict: true, schema: { type: 'object', properties: { city: { type: 'string', enum: ['Oslo', 'Rome'] } }, required: ['city'], additionalProperties: false } } },
  });
  assert.ok(['Oslo', 'Rome'].includes(JSON.parse(r.output_text).city), r.output_text);
});

test('errors: unknown models and built-in tools are 4xx the SDK raises', async () => {
  await assert.rejects(client.responses.create({ model: 'gpt-x', input: 'hi' }), OpenAI.NotFoundError);
  await assert.rejects(client.responses.create({ model, input: 'hi', tools: [{ type: 'web_search' }] }), OpenAI.BadRequestError);
  await assert.rejects(client.responses.create({ model, input: 'hi', previous_response_id: 'resp_missing' }), OpenAI.NotFoundError);
});
