// Drives kvchat-cli serve with the official openai npm client, one scenario per run; prints one
// JSON object with what it saw (tests/server/test_openai_client.cpp checks it).
//   usage: node openai_client.mjs NODE_MODULES_DIR BASE_URL MODEL SCENARIO [FILE]
// Scenarios: chat, stream, completions, models, stop, errors, abort, turns (writes the
// conversation to FILE), resume (reads it from FILE and asks one more question), greedy (one
// streamed greedy answer), app (the app's "Serve on localhost": greedy, two sampled turns,
// then a long stream the app's switch ends; tests/ui/test_gui_serve.cpp).
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';

const [nodeModules, baseURL, model, scenario, file] = process.argv.slice(2);
const require = createRequire(nodeModules.replace(/\/?$/, '/'));
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
const client = new OpenAI({ baseURL, apiKey: process.env.KVC_API_KEY ?? 'none', maxRetries: 0, timeout: 60000 });

const system = { role: 'system', content: 'You are a terse assistant.' };

async function streamChat(messages, extra = {}) {
  const stream = await client.chat.completions.create({
    model, messages, stream: true, stream_options: { include_usage: true }, ...extra,
  });
  let content = '', role = null, finish = null, usage = null, kvchat = null, chunks = 0;
  for await (const chunk of stream) {
    ++chunks;
    for (const c of chunk.choices) {
      if (c.delta?.role) role = c.delta.role;
      if (c.delta?.content) content += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) {
      usage = chunk.usage;
      kvchat = chunk.kvchat ?? null;
    }
  }
  return { content, role, finish_reason: finish, usage, kvchat, chunks };
}

async function apiError(promise) {
  try {
    await promise;
    return { status: 200 };
  } catch (e) {
    return { status: e.status ?? -1, code: e.code ?? null, param: e.param ?? null, type: e.type ?? null, message: e.message };
  }
}

async function metricValue(pattern) {
  const text = await (await fetch(baseURL.replace(/\/v1$/, '') + '/metrics', {
    headers: { Authorization: `Bearer ${process.env.KVC_API_KEY ?? 'none'}` },
  })).text();
  const line = text.split('\n').find((l) => l.startsWith(pattern));
  return line ? Number(line.split(' ').pop()) : 0;
}

// A conversation of `n` turns, streamed, sampled (so earlier answers are ids a fresh
// tokenization would not give back), each answer appended as the client got it.
async function turns(n) {
  const messages = [system];
  const out = [];
  for (let t = 0; t < n; ++t) {
    messages.push({ role: 'user', content: `Question ${t + 1}: what happens next in the story?` });
    const r = await streamChat(messages, { max_tokens: 24, temperature: 0.9, seed: 100 + t });
    out.push({ usage: r.usage, kvchat: r.kvchat, finish_reason: r.finish_reason });
    messages.push({ role: 'assistant', content: r.content });
  }
  return { turns: out, messages };
}

const scenarios = {
  async chat() {
    const r = await client.chat.completions.create({
      model, messages: [system, { role: 'user', content: 'Say something.' }], max_tokens: 12, temperature: 0,
    });
    return { object: r.object, model: r.model, content: r.choices[0].message.content, role: r.choices[0].message.role,
             finish_reason: r.choices[0].finish_reason, usage: r.usage };
  },
  async stream() {
    const messages = [system, { role: 'user', content: 'Say something.' }];
    const s = await streamChat(messages, { max_tokens: 12, temperature: 0 });
    const whole = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
    return { ...s, whole: whole.choices[0].message.content };
  },
  async completions() {
    const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
    const s = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0, stream: true });
    let streamed = '', finish = null;
    for await (const chunk of s) {
      streamed += chunk.choices[0]?.text ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    return { object: r.object, text: r.choices[0].text, finish_reason: r.choices[0].finish_reason, usage: r.usage,
             streamed, streamed_finish_reason: finish };
  },
  async models() {
    const list = await client.models.list();
    const ids = [];
    for await (const m of list) ids.push(m.id);
    const one = await client.models.retrieve(model);
    return { ids, retrieved: one.id };
  },
  async stop() {
    const messages = [system, { role: 'user', content: 'Tell me a long story.' }];
    const ask = (extra) => client.chat.completions.create({ model, messages, max_tokens: 32, temperature: 0, ...extra });
    const free = (await ask({})).choices[0].message.content;
    // A stop string from the middle of the free answer, cut on code points.
    const cps = Array.from(free);
    const stop = cps.slice(Math.floor(cps.length / 2), Math.floor(cps.length / 2) + 3).join('');
    const expected = free.slice(0, free.indexOf(stop));
    const r = await ask({ stop: [stop] });
    const s = await streamChat(messages, { max_tokens: 32, temperature: 0, stop });
    return { free, stop, expected, content: r.choices[0].message.content, finish_reason: r.choices[0].finish_reason,
             streamed: s.content, streamed_finish_reason: s.finish_reason };
  },
  async errors() {
    const messages = [{ role: 'user', content: 'Hi' }];
    return {
      bad_model: await apiError(client.chat.completions.create({ model: 'no-such-model', messages })),
      bad_temperature: await apiError(client.chat.completions.create({ model, messages, temperature: 5 })),
      no_messages: await apiError(client.chat.completions.create({ model, messages: [] })),
      too_many_tokens: await apiError(client.chat.completions.create({ model, messages, max_tokens: 100000000 })),
      after: (await client.chat.completions.create({ model, messages, max_tokens: 4 })).choices[0].finish_reason,
    };
  },
  async abort() {
    const before = await metricValue('kvchat_generations_total{endpoint="chat",outcome="cancelled"}');
    const stream = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Write forever.' }], max_tokens: 1500, temperature: 1, stream: true,
    });
    let chunks = 0;
    try {
      for await (const chunk of stream) {
        // Stop reading at once: chunks already buffered would otherwise still arrive here.
        if (chunk.choices[0]?.delta?.content && ++chunks === 2) {
          stream.controller.abort();
          break;
        }
      }
    } catch (e) {
      if (e.name !== 'AbortError' && !/abort/i.test(e.message)) throw e;
    }
    // The server notices the hang-up and cancels the generation (well before 1500 tokens).
    let after = before;
    const deadline = Date.now() + 10000;
    while (after <= before && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      after = await metricValue('kvchat_generations_total{endpoint="chat",outcome="cancelled"}');
    }
    const next = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 });
    const decoded = await metricValue('kvchat_engine_decoded_tokens_total');
    return { chunks, cancelled_before: before, cancelled_after: after, next_finish_reason: next.choices[0].finish_reason,
             decoded_tokens: decoded };
  },
  async turns() {
    const r = await turns(4);
    writeFileSync(file, JSON.stringify(r.messages));
    return { turns: r.turns };
  },
  async greedy() {
    return streamChat([system, { role: 'user', content: 'Say something.' }], { max_tokens: 12, temperature: 0 });
  },
  async app() {
    const greedy = await scenarios.greedy();
    const messages = [system, { role: 'user', content: 'Question 1: tell me a story.' }];
    const t1 = await streamChat(messages, { max_tokens: 24, temperature: 0.8, seed: 1 });
    messages.push({ role: 'assistant', content: t1.content }, { role: 'user', content: 'Question 2: and then?' });
    const t2 = await streamChat(messages, { max_tokens: 24, temperature: 0.8, seed: 2 });
    messages.push({ role: 'assistant', content: t2.content }, { role: 'user', content: 'Question 3: tell it all again.' });
    // Greedy on random weights runs to max_tokens: in flight until the app turns the API off.
    const long = { content: '', finish_reason: null, error: null };
    try {
      const stream = await client.chat.completions.create({ model, messages, stream: true, max_tokens: 3000, temperature: 0 });
      for await (const chunk of stream) {
        for (const c of chunk.choices) {
          if (c.delta?.content) long.content += c.delta.content;
          if (c.finish_reason) long.finish_reason = c.finish_reason;
        }
      }
    } catch (e) {
      long.error = { status: e.status ?? null, code: e.code ?? null, type: e.type ?? null, message: e.message };
    }
    return { greedy, turns: [t1, t2], long };
  },
  async resume() {
    const messages = JSON.parse(readFileSync(file, 'utf8'));
    messages.push({ role: 'user', content: 'And after a restart?' });
    const r = await streamChat(messages, { max_tokens: 8, temperature: 0.9, seed: 7 });
    return { usage: r.usage, kvchat: r.kvchat, finish_reason: r.finish_reason };
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
