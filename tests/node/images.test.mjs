// Images through the official `openai` client: an image_url part as a data URL is served, the same
// image again is read from the prompt cache, and an image the server cannot use is a 400 the client
// raises as BadRequestError naming the part. Started by run.sh (the server has --mmproj).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.PREFIXD_BASE_URL;
const model = process.env.PREFIXD_MODEL_ID;
assert.ok(baseURL && model, 'run this through tests/node/run.sh');
const client = new OpenAI({ baseURL, apiKey: 'not-checked', maxRetries: 0, timeout: 60_000 });

// A 24-bit BMP whose pixels depend on `shade`.
function bmp(width, height, shade) {
  const row = Math.ceil((width * 3) / 4) * 4;
  const buffer = Buffer.alloc(54 + row * height);
  buffer.write('BM', 0, 'latin1');
  buffer.writeUInt32LE(buffer.length, 2);
  buffer.writeUInt32LE(54, 10);
  buffer.writeUInt32LE(40, 14);
  buffer.writeInt32LE(width, 18);
  buffer.writeInt32LE(height, 22);
  buffer.writeUInt16LE(1, 26);
  buffer.writeUInt16LE(24, 28);
  buffer.writeUInt32LE(row * height, 34);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const at = 54 + y * row + x * 3;
      buffer[at] = (x * 7 + shade) & 255;
      buffer[at + 1] = (y * 5 + shade * 3) & 255;
      buffer[at + 2] = (x * y + shade) & 255;
    }
  }
  return buffer;
}

const ask = (url) => ({
  model,
  max_tokens: 4,
  temperature: 0,
  messages: [
    { role: 'system', content: 'You describe pictures in a few words, carefully and without guessing.' },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'What does this picture show?' },
        { type: 'image_url', image_url: { url } },
      ],
    },
  ],
});

test('an image is served, and the same image again comes from the prompt cache', async () => {
  const url = `data:image/bmp;base64,${bmp(24, 16, 5).toString('base64')}`;
  const first = await client.chat.completions.create(ask(url));
  assert.equal(first.choices[0].message.role, 'assistant');
  assert.equal(first.prompt_cache.images.count, 1);
  assert.equal(first.prompt_cache.images.encoded, 1);
  const again = await client.chat.completions.create(ask(url));
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens - 1);
  assert.equal(again.prompt_cache.images.cached, 1);
  assert.equal(again.prompt_cache.images.encoded, 0);
  assert.equal(again.choices[0].message.content, first.choices[0].message.content);
});

test('an image the server cannot use is a BadRequestError naming the part', async () => {
  await assert.rejects(client.chat.completions.create(ask('https://example.com/cat.png')), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError);
    assert.equal(error.param, 'messages[1].content[1].image_url.url');
    return true;
  });
  const notAnImage = `data:image/png;base64,${Buffer.from('not a picture').toString('base64')}`;
  await assert.rejects(client.chat.completions.create(ask(notAnImage)), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError);
    assert.equal(error.param, 'messages[1].content[1]');
    assert.match(error.message, /supported format/);
    return true;
  });
});
