// kvchat-cli serve's /v1/messages driven by the official @anthropic-ai/sdk npm client; prints one JSON object
// with what it saw (tests/server/test_anthropic_client.cpp checks it).
//   usage: node anthropic_client.mjs NODE_MODULES_DIR BASE_URL MODEL API_KEY
// One run against one fresh server, in this order: count_tokens, a plain message (the first request:
// nothing cached yet), the same request streamed with client.messages.stream, the conversation's next
// turn (its history cached), a tool use round trip (a call forced with tool_choice any, its
// tool_result, the answer), a named forced tool whole and streamed, bad requests, a wrong key.
import { createRequire } from 'node:module';

const [nodeModules, baseURL, model, apiKey] = process.argv.slice(2);
const require = createRequire(nodeModules.replace(/\/?$/, '/'));
const mod = require('@anthropic-ai/sdk');
const Anthropic = mod.Anthropic ?? mod.default ?? mod;
// The SDK adds /v1/messages itself; it sends the key as x-api-key, and anthropic-version.
const root = baseURL.replace(/\/v1\/?$/, '');
const client = new Anthropic({ baseURL: root, apiKey, maxRetries: 0, timeout: 60000 });

const system = 'You are a weather bot. Call get_weather for any city.';
const enumTool = (name, key, values) => ({
  name, description: `The ${key} tool`,
  input_schema: { type: 'object', properties: { [key]: { type: 'string', enum: values } }, required: [key],
                  additionalProperties: false },
});
const tools = [enumTool('get_weather', 'city', ['Paris', 'Lyon', 'Nice']), enumTool('get_time', 'zone', ['UTC', 'CET'])];

async function apiError(promise) {
  try {
    await promise;
    return { status: 200 };
  } catch (e) {
    return { class: e.constructor?.name ?? null, status: e.status ?? -1, type: e.error?.error?.type ?? null, shape: e.error?.type ?? null,
             message: e.message, bad_request: e instanceof Anthropic.BadRequestError,
             authentication: e instanceof Anthropic.AuthenticationError };
  }
}

const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
const brief = (m) => ({ id: m.id, type: m.type, role: m.role, model: m.model, stop_reason: m.stop_reason,
                        stop_sequence: m.stop_sequence, usage: m.usage, blocks: m.content.map((b) => b.type),
                        text: textOf(m), tool_use: m.content.filter((b) => b.type === 'tool_use') });

async function run() {
  const out = {};
  const first = { model, max_tokens: 12, temperature: 0, system, messages: [{ role: 'user', content: 'Hello there, who are you?' }] };
  const { max_tokens: _, temperature: __, ...countable } = first;
  out.count = (await client.messages.countTokens(countable)).input_tokens;
  const plain = await client.messages.create(first);
  out.plain = brief(plain);

  // Streamed with the SDK's helper: text events, the raw event order, and its final message.
  const stream = client.messages.stream(first);
  let deltas = '';
  const events = [];
  stream.on('text', (t) => { deltas += t; });
  stream.on('streamEvent', (e) => { events.push(e.type); });
  const final = await stream.finalMessage();
  out.stream = { deltas, events, final: brief(final) };
  // The same on the wire (the SDK drops ping events): the event names in order.
  const raw = await fetch(`${root}/v1/messages`, {
    method: 'POST', body: JSON.stringify({ ...first, stream: true }),
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey, 'anthropic-version': '2023-06-01' },
  });
  out.wire = { status: raw.status, type: raw.headers.get('content-type'),
               events: [...(await raw.text()).matchAll(/^event: (\w+)$/gm)].map((m) => m[1]) };

  // The conversation's next turn: its history (the first answer as the server gave it) is cached.
  out.next = brief(await client.messages.create({
    ...first, messages: [...first.messages, { role: 'assistant', content: plain.content }, { role: 'user', content: 'And then?' }],
  }));

  // A tool use round trip: a forced call (random weights call nothing by themselves), its result, the answer.
  const ask = { model, max_tokens: 200, temperature: 0, system, tools,
                messages: [{ role: 'user', content: 'What is the weather in Paris?' }] };
  const called = await client.messages.create({ ...ask, tool_choice: { type: 'any', disable_parallel_tool_use: true } });
  out.called = brief(called);
  const use = called.content.find((b) => b.type === 'tool_use');
  if (use) {
    const result = { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '18 C and sunny' }] };
    const next = { ...ask, max_tokens: 12, tool_choice: { type: 'auto' },
                   messages: [...ask.messages, { role: 'assistant', content: called.content }, result] };
    out.answered = brief(await client.messages.create(next));
    // The call is in the prompt: the same request counts fewer tokens with the assistant's call left out.
    const { max_tokens: _m, temperature: _t, ...counted } = next;
    const without = { ...counted, messages: [...ask.messages, { role: 'assistant', content: 'x' }, result] };
    const count = async (body) => (await client.messages.countTokens(body)).input_tokens;
    out.call_tokens = await count(counted) - await count(without);
    // And so is the tool's result: an empty one counts fewer.
    const empty = { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '' }] };
    out.result_tokens = await count(counted) - await count({ ...counted, messages: [...counted.messages.slice(0, -1), empty] });
  }
  out.named = brief(await client.messages.create({ ...ask, tool_choice: { type: 'tool', name: 'get_time' } }));
  const named = client.messages.stream({ ...ask, tool_choice: { type: 'tool', name: 'get_time' } });
  let json = '';
  named.on('inputJson', (partial) => { json += partial; });
  out.named_stream = { ...brief(await named.finalMessage()), input_json: json };

  // Bad requests surface as the SDK's errors, with the server's message.
  out.no_max_tokens = await apiError(client.messages.create({ model, messages: first.messages }));
  out.image = await apiError(client.messages.create({
    ...first, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }],
  }));
  out.stream_error = await apiError(client.messages.stream({ ...first, temperature: 3 }).finalMessage());

  // A client that aborts mid-stream: the server cancels the generation (well before its 1500 tokens).
  const metric = async (name) => {
    const text = await (await fetch(`${root}/metrics`, { headers: { 'x-api-key': apiKey } })).text();
    const line = text.split('\n').find((l) => l.startsWith(name));
    return line ? Number(line.split(' ').pop()) : 0;
  };
  const cancelled = 'kvchat_generations_total{endpoint="chat",outcome="cancelled"}';
  const before = await metric(cancelled);
  const long = client.messages.stream({ model, max_tokens: 1500, temperature: 1, messages: [{ role: 'user', content: 'Write forever.' }] });
  let pieces = 0;
  try {
    for await (const e of long) {
      if (e.type === 'content_block_delta' && ++pieces === 2) {
        long.abort();
        break;
      }
    }
  } catch (e) {
    if (!/abort/i.test(`${e.name} ${e.message}`)) throw e;
  }
  let after = before;
  for (const deadline = Date.now() + 10000; after <= before && Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 50));
    after = await metric(cancelled);
  }
  out.abort = { pieces, cancelled: after - before, decoded: await metric('kvchat_engine_decoded_tokens_total') };
  const wrong = new Anthropic({ baseURL: root, apiKey: 'wrong', maxRetries: 0 });
  out.wrong_key = await apiError(wrong.messages.create(first));
  return out;
}

try {
  process.stdout.write(JSON.stringify(await run()) + '\n');
} catch (e) {
  process.stdout.write(JSON.stringify({ failed: `${e.name}: ${e.message}`, status: e.status ?? null }) + '\n');
  process.exitCode = 1;
}
