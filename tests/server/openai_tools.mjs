// Function calling through the official openai npm client; prints one JSON object with what it saw
// (tests/server/test_openai_client.cpp checks it).
//   usage: node openai_tools.mjs NODE_MODULES_DIR BASE_URL MODEL SCENARIO [FILE]
// Scenarios: loop (against a real serve: tools whole and streamed, an agent loop of 3 requests with
// tool messages, tool_choice variants and bad tools), recorded (FILE holds responses kvchat's
// server code wrote for recorded model replies, whole and as server-sent events; the client reads
// them through a fetch that answers with them, as it would read them from the wire).
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const [nodeModules, baseURL, model, scenario, file] = process.argv.slice(2);
const require = createRequire(nodeModules.replace(/\/?$/, '/'));
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
const client = new OpenAI({ baseURL, apiKey: process.env.KVC_API_KEY ?? 'none', maxRetries: 0, timeout: 60000 });

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city now',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
const system = { role: 'system', content: 'You are a weather bot. Call get_weather for any city.' };
const call = (id, city) => ({ id, type: 'function', function: { name: 'get_weather', arguments: JSON.stringify({ city }) } });

async function apiError(promise) {
  try {
    await promise;
    return { status: 200 };
  } catch (e) {
    return { status: e.status ?? -1, code: e.code ?? null, param: e.param ?? null, message: e.message };
  }
}

// A streamed answer read as a client reads one: content, and tool calls assembled by index.
async function readStream(stream) {
  let content = '', finish = null, usage = null, chunks = 0;
  const calls = [];
  for await (const chunk of stream) {
    ++chunks;
    for (const c of chunk.choices) {
      if (c.delta?.content) content += c.delta.content;
      for (const d of c.delta?.tool_calls ?? []) {
        const at = calls[d.index] ?? (calls[d.index] = { id: null, type: null, function: { name: '', arguments: '' } });
        if (d.id) at.id = d.id;
        if (d.type) at.type = d.type;
        if (d.function?.name) at.function.name += d.function.name;
        if (d.function?.arguments) at.function.arguments += d.function.arguments;
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  return { content, tool_calls: calls, finish_reason: finish, usage, chunks };
}

// The SDK's own accumulating stream helper (beta in openai 4.x).
function helperStream(c, body) {
  const chat = c.beta?.chat?.completions ?? c.chat.completions;
  return chat.stream(body);
}

const scenarios = {
  async loop() {
    const base = { model, tools, max_tokens: 8, temperature: 0 };
    const messages = [system, { role: 'user', content: 'What is the weather in Paris?' }];
    const whole = await client.chat.completions.create({ ...base, messages, tool_choice: 'auto' });
    const streamed = await readStream(await client.chat.completions.create({
      ...base, messages, stream: true, stream_options: { include_usage: true }, parallel_tool_calls: true,
    }));
    const helper = await helperStream(client, { ...base, messages }).finalChatCompletion();
    // The agent loop: the client runs the calls and sends their results back.
    messages.push({ role: 'assistant', content: null, tool_calls: [call('call_1', 'Paris')] });
    messages.push({ role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 21, "sky": "sunny"}' });
    const t2 = await readStream(await client.chat.completions.create({
      ...base, messages, stream: true, stream_options: { include_usage: true },
    }));
    messages.push({ role: 'assistant', content: 'Checking both.', tool_calls: [call('call_2', 'Lyon'), call('call_3', 'Nice')] });
    messages.push({ role: 'tool', tool_call_id: 'call_2', content: '{"temp_c": 18}' });
    messages.push({ role: 'tool', tool_call_id: 'call_3', content: '{"temp_c": 24}' });
    const t3 = await client.chat.completions.create({ ...base, messages });
    const ask = (extra) => client.chat.completions.create({ ...base, messages, ...extra });
    return {
      whole: { finish_reason: whole.choices[0].finish_reason, message: whole.choices[0].message, usage: whole.usage },
      streamed: { finish_reason: streamed.finish_reason, chunks: streamed.chunks },
      helper: { finish_reason: helper.choices[0].finish_reason },
      turns: [whole.usage, t2.usage, t3.usage],
      none: (await ask({ tool_choice: 'none' })).choices[0].finish_reason,
      required_with_schema: await apiError(ask({
        tool_choice: 'required', response_format: { type: 'json_object' },
      })),
      unknown_name: await apiError(ask({ tool_choice: { type: 'function', function: { name: 'nope' } } })),
      bad_tool: await apiError(ask({ tools: [{ type: 'function', function: { name: 'has space' } }] })),
      no_call_id: await apiError(ask({ messages: [...messages, { role: 'tool', content: 'x' }] })),
    };
  },
  // tool_choice required / named: grammar-constrained sampling makes even random weights call.
  async forced() {
    const enumTool = (name, key, values) => ({
      type: 'function',
      function: {
        name, parameters: {
          type: 'object', properties: { [key]: { type: 'string', enum: values } }, required: [key],
          additionalProperties: false,
        },
      },
    });
    const forcedTools = [enumTool('get_weather', 'city', ['Paris', 'Lyon', 'Nice']), enumTool('get_time', 'zone', ['UTC', 'CET'])];
    const base = {
      model, tools: forcedTools, max_tokens: 200, temperature: 0, parallel_tool_calls: false,
      messages: [system, { role: 'user', content: 'What is the weather in Paris?' }],
    };
    const summary = (finish, calls) => ({ finish_reason: finish, tool_calls: (calls ?? []).map((c) => ({
      id: c.id, type: c.type, name: c.function.name, arguments: c.function.arguments,
    })) });
    const whole = await client.chat.completions.create({ ...base, tool_choice: 'required' });
    const streamed = await readStream(await client.chat.completions.create({ ...base, tool_choice: 'required', stream: true }));
    const named = await client.chat.completions.create({
      ...base, tool_choice: { type: 'function', function: { name: 'get_time' } },
    });
    const seeded = [];
    for (let seed = 1; seed <= 4; ++seed) {
      const r = await client.chat.completions.create({ ...base, tool_choice: 'required', temperature: 1, seed });
      seeded.push(summary(r.choices[0].finish_reason, r.choices[0].message.tool_calls));
    }
    return {
      whole: summary(whole.choices[0].finish_reason, whole.choices[0].message.tool_calls),
      streamed: summary(streamed.finish_reason, streamed.tool_calls),
      named: summary(named.choices[0].finish_reason, named.choices[0].message.tool_calls),
      seeded,
    };
  },
  async recorded() {
    const cases = JSON.parse(readFileSync(file, 'utf8'));
    const out = [];
    for (const c of cases) {
      let body = null;
      const fake = new OpenAI({
        baseURL: 'http://recorded.invalid/v1', apiKey: 'none', maxRetries: 0,
        fetch: async () => new Response(body.text, { status: 200, headers: { 'content-type': body.type } }),
      });
      const ask = { model, messages: [{ role: 'user', content: 'Weather?' }], tools };
      body = { text: c.whole, type: 'application/json' };
      const whole = await fake.chat.completions.create(ask);
      body = { text: c.sse, type: 'text/event-stream' };
      const read = await readStream(await fake.chat.completions.create({ ...ask, stream: true }));
      body = { text: c.sse, type: 'text/event-stream' };
      const helper = await helperStream(fake, ask).finalChatCompletion();
      out.push({
        name: c.name,
        whole: { content: whole.choices[0].message.content, tool_calls: whole.choices[0].message.tool_calls ?? [],
                 finish_reason: whole.choices[0].finish_reason },
        stream: { content: read.content, tool_calls: read.tool_calls, finish_reason: read.finish_reason },
        helper: { content: helper.choices[0].message.content, tool_calls: helper.choices[0].message.tool_calls ?? [],
                  finish_reason: helper.choices[0].finish_reason },
      });
    }
    return { cases: out };
  },
};

try {
  const run = scenarios[scenario];
  if (!run) throw new Error(`unknown scenario ${scenario}`);
  process.stdout.write(JSON.stringify(await run()) + '\n');
} catch (e) {
  process.stdout.write(JSON.stringify({ failed: `${e.name}: ${e.message}`, status: e.status ?? null }) + '\n');
  process.exitCode = 1;
}
