// Warm a shared prefix before the first user arrives, then chat through the official `openai`
// client: the first request takes the whole prepared chain from prefixd's prompt cache.
//
//   npm install openai
//   PREFIXD_BASE_URL=http://127.0.0.1:8080/v1 node warm-key.mjs
//
// Environment: PREFIXD_BASE_URL (default http://127.0.0.1:8080/v1), PREFIXD_API_KEY (when the
// server was started with --api-key or --api-keys), PREFIXD_MODEL (default: the first model the
// server lists). Prints one JSON line: the chain's tokens and the first chat's usage.
import OpenAI from 'openai';

const baseURL = (process.env.PREFIXD_BASE_URL ?? 'http://127.0.0.1:8080/v1').replace(/\/$/, '');
const apiKey = process.env.PREFIXD_API_KEY ?? 'none';
const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` };

const system = 'You are the booking agent of a small travel company. Answer in short numbered steps, never invent a ' +
  'price, and call a tool whenever you need a fact about flights, hotels or the weather.';
const tools = [
  {
    type: 'function',
    function: {
      name: 'search_flights',
      description: 'Flights between two airports on a date',
      parameters: {
        type: 'object',
        properties: { from: { type: 'string' }, to: { type: 'string' }, date: { type: 'string', description: 'YYYY-MM-DD' } },
        required: ['from', 'to', 'date'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The forecast for a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];

// The control plane answers {"supported": false, "code", "message", ...} when it cannot help.
async function control(method, operation, body) {
  const response = await fetch(`${baseURL}/cache/${operation}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const reply = await response.json();
  if (!response.ok || reply.supported !== true) {
    throw new Error(`${operation}: HTTP ${response.status} ${reply.code ?? ''} ${reply.message ?? reply.error?.message ?? ''}`);
  }
  return reply;
}

export async function warmAndAsk(question) {
  const capabilities = await control('GET', 'capabilities');
  if (!capabilities.supports_prepare_modules) throw new Error('this server cannot prepare module chains');

  // One prefill of the system prompt and the tool schema, before any user asks.
  const prepared = await control('POST', 'prepare_modules', {
    modules: [
      { module_id: 'system', system_prompt: system },
      { module_id: 'tools', tools },
    ],
  });

  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const model = process.env.PREFIXD_MODEL ?? (await client.models.list()).data[0].id;
  // The request starts with exactly the prepared chain: the same system message and tools.
  const chat = await client.chat.completions.create({
    model,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: question },
    ],
    tools,
    max_tokens: 16,
  });
  return {
    chain_tokens: prepared.tokens,
    prompt_tokens: chat.usage.prompt_tokens,
    cached_tokens: chat.usage.prompt_tokens_details?.cached_tokens ?? 0,
    fed_tokens: chat.prompt_cache?.fed_tokens,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    console.log(JSON.stringify(await warmAndAsk(process.argv[2] ?? 'Find me a flight from Lyon to Rome on 2027-03-14.')));
  } catch (error) {
    console.error(`warm-key: ${error.message}`);
    process.exit(1);
  }
}
