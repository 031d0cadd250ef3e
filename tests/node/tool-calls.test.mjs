// Tool calls and structured output through the official `openai` client against a real prefixd
// (the tiny generated model: random weights, so only the grammar makes the output well formed).
// Started by run.sh (PREFIXD_BASE_URL, PREFIXD_MODEL_ID).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.PREFIXD_BASE_URL;
const model = process.env.PREFIXD_MODEL_ID;
assert.ok(baseURL && model, 'run this through tests/node/run.sh');
const client = new OpenAI({ baseURL, apiKey: 'not-checked', maxRetries: 0, timeout: 60_000 });

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Weather for a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 16 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
        required: ['city', 'days'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      parameters: { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false },
    },
  },
];
const messages = [{ role: 'user', content: 'What is the weather in Lisbon for three days?' }];

function checkArguments(name, text) {
  const args = JSON.parse(text);
  if (name === 'get_weather') {
    assert.deepEqual(Object.keys(args), ['city', 'days']);
    assert.equal(typeof args.city, 'string');
    assert.ok([...args.city].length <= 16);  // maxLength counts code points, not UTF-16 units
    assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7);
  } else {
    assert.equal(name, 'get_time');
    assert.ok(['UTC', 'CET'].includes(args.zone));
  }
}

test('tool_choice required gives a parsable call to a declared tool', async () => {
  for (const seed of [1, 2, 3]) {
    const reply = await client.chat.completions.create({
      model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 200, seed,
    });
    const choice = reply.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    assert.equal(call.type, 'function');
    checkArguments(call.function.name, call.function.arguments);
  }
});

test('a named function, streamed: delta.tool_calls assemble into a call to that function', async () => {
  const stream = await client.chat.completions.create({
    model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_time' } }, max_tokens: 200, stream: true,
  });
  let name = '';
  let args = '';
  let id = '';
  let finish = null;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    for (const delta of choice.delta.tool_calls ?? []) {
      assert.equal(delta.index, 0);
      if (delta.id) id = delta.id;
      if (delta.function?.name) name += delta.function.name;
      args += delta.function?.arguments ?? '';
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  assert.equal(finish, 'tool_calls');
  assert.match(id, /^call_/);
  assert.equal(name, 'get_time');
  checkArguments(name, args);
});

test('response_format json_schema gives content that validates', async () => {
  const reply = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Describe a person.' }],
    max_tokens: 200,
    seed: 7,  // a random-weight model: a seed keeps the sampled text the same on every run
    response_format: {
      type: 'json_schema',
      json_schema: {
        name: 'person',
        schema: {
          type: 'object',
          properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 120 },
                        role: { enum: ['admin', 'user'] } },
          required: ['name', 'age', 'role'],
          additionalProperties: false,
        },
      },
    },
  });
  const person = JSON.parse(reply.choices[0].message.content);
  assert.deepEqual(Object.keys(person), ['name', 'age', 'role']);
  assert.ok([...person.name].length <= 12);  // code points, as JSON Schema counts them
  assert.ok(Number.isInteger(person.age) && person.age >= 0 && person.age <= 120);
  assert.ok(['admin', 'user'].includes(person.role));
  assert.equal(reply.choices[0].finish_reason, 'stop');
});

test('a schema the server cannot enforce is a 400 naming it', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model, messages, max_tokens: 10,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a+$' } } },
    }),
    (error) => error.status === 400 && error.param === 'response_format.json_schema.schema' && /pattern/.test(error.message),
  );
});
