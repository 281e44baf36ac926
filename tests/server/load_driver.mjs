// A load driver speaking OpenAI HTTP through the official openai npm client: N conversations of
// T streamed turns over one shared system prompt, to kvchat-cli serve or llama-server alike.
// Prints one JSON object: requests, errors, throughput, TTFT percentiles overall and per turn,
// inter-token latency (ITL, client side as vLLM's benchmark measures it: the gaps between a
// stream's content chunks' arrivals; a server may put several tokens in one chunk when they
// come faster than it writes, so compare with the server's own per-token histogram),
// and the prompt-cache criterion (turn n's cached tokens >= turn n-1's prompt + answer - 16).
//   usage: node load_driver.mjs NODE_MODULES_DIR BASE_URL MODEL CONVERSATIONS TURNS MAX_TOKENS
//                               [concurrent|round-robin] [HISTORY_WORDS]
// concurrent: every conversation at once, each running its turns in order. round-robin: one
// request at a time, turn 1 of every conversation, then turn 2 of every one, ... (more
// conversations than a server has slots shows whether it keeps their prefixes).
// HISTORY_WORDS pads each conversation's first message to a long history.
// Environment: LOAD_STATE=FILE continues the conversations saved in FILE (if it exists) and saves
// them there at the end (a second run after a server restart); LOAD_BAN_TOKENS=A-B sends a
// logit_bias of -100 for ids A..B (llama-server answers 500 on a random model's stray bytes).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

const [nodeModules, baseURL, model, nConvArg, nTurnsArg, maxTokensArg, modeArg, historyArg] = process.argv.slice(2);
const nConv = Number(nConvArg), nTurns = Number(nTurnsArg), maxTokens = Number(maxTokensArg);
const mode = modeArg ?? 'concurrent', historyWords = Number(historyArg ?? 0);
const require = createRequire(nodeModules.replace(/\/?$/, '/'));
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
// A fresh connection per request: llama-server closes idle keep-alive connections, which a
// reused socket reports as a connection error.
const http = require('node:http');
const client = new OpenAI({ baseURL, apiKey: process.env.KVC_API_KEY ?? 'none', maxRetries: 0, timeout: 120000,
                            httpAgent: new http.Agent({ keepAlive: false }) });

let logitBias = null;
if (process.env.LOAD_BAN_TOKENS) {
  const [a, b] = process.env.LOAD_BAN_TOKENS.split('-').map(Number);
  logitBias = {};
  for (let t = a; t <= b; ++t) logitBias[t] = -100;
}
const stateFile = process.env.LOAD_STATE ?? '';

const words = ['the', 'little', 'cat', 'saw', 'a', 'big', 'red', 'ball', 'and', 'ran', 'to', 'play', 'with', 'it'];
const system = {
  role: 'system',
  content: 'You are a friendly storyteller. ' + Array.from({ length: 60 }, (_, i) => words[i % words.length]).join(' ') + '.',
};

function percentile(xs, p) {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

// One streamed turn: TTFT at the first content delta, usage from the final chunk.
async function turn(messages, seed) {
  const t0 = performance.now();
  const stream = await client.chat.completions.create({
    model, messages, stream: true, stream_options: { include_usage: true }, max_tokens: maxTokens,
    temperature: 0.8, seed, ...(logitBias ? { logit_bias: logitBias } : {}),
  });
  let content = '', ttft = null, usage = null, timings = null, last = null, nChunks = 0;
  const itl = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta?.content) {
        const now = performance.now();
        if (ttft === null) ttft = now - t0;
        if (last !== null) itl.push(now - last);
        last = now;
        ++nChunks;
        content += c.delta.content;
      }
    }
    if (chunk.usage) usage = chunk.usage;
    if (chunk.timings) timings = chunk.timings;  // llama-server's own figures
  }
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? timings?.cache_n ?? null;
  return { content, ttft_ms: ttft ?? performance.now() - t0, prompt: usage?.prompt_tokens ?? null,
           completion: usage?.completion_tokens ?? 0, cached, itl, n_chunks: nChunks };
}

const saved = stateFile && existsSync(stateFile) ? JSON.parse(readFileSync(stateFile, 'utf8')) : null;
const conversations = Array.from({ length: nConv }, (_, c) => {
  const pad = historyWords > 0
    ? ' ' + Array.from({ length: historyWords }, (_, i) => words[(i * 7 + c) % words.length]).join(' ') : '';
  return { id: c, messages: saved?.[c] ?? [system], first: `Conversation ${c + 1}: tell me a story.${pad}`, turns: [] };
});
const errors = [];
let nRequests = 0;

async function step(conv, t) {
  const first = conv.messages.length === 1;
  conv.messages.push({ role: 'user', content: first ? conv.first : `Question ${conv.messages.length}: what happened next?` });
  ++nRequests;
  try {
    const r = await turn(conv.messages, 1000 * conv.id + t);
    conv.messages.push({ role: 'assistant', content: r.content });
    conv.turns.push(r);
  } catch (e) {
    errors.push(`conversation ${conv.id + 1} turn ${t + 1}: ${e.status ?? ''} ${e.message}`);
    conv.messages.pop();
  }
}

const start = performance.now();
if (mode === 'round-robin') {
  for (let t = 0; t < nTurns; ++t) for (const conv of conversations) await step(conv, t);
} else {
  await Promise.all(conversations.map(async (conv) => { for (let t = 0; t < nTurns; ++t) await step(conv, t); }));
}
const wallS = (performance.now() - start) / 1e3;
if (stateFile) writeFileSync(stateFile, JSON.stringify(conversations.map((c) => c.messages)));

const all = conversations.flatMap((c) => c.turns);
const perTurn = Array.from({ length: nTurns }, (_, t) => {
  const rs = conversations.map((c) => c.turns[t]).filter(Boolean);
  return {
    turn: t + 1, n: rs.length,
    ttft_p50_ms: percentile(rs.map((r) => r.ttft_ms), 50), ttft_p99_ms: percentile(rs.map((r) => r.ttft_ms), 99),
    prompt_mean: rs.length ? rs.reduce((a, r) => a + (r.prompt ?? 0), 0) / rs.length : null,
    cached_mean: rs.length ? rs.reduce((a, r) => a + (r.cached ?? 0), 0) / rs.length : null,
  };
});
let nChecked = 0, nMeeting = 0;
for (const c of conversations) {
  for (let t = 1; t < c.turns.length; ++t) {
    const prev = c.turns[t - 1], cur = c.turns[t];
    if (prev.prompt === null || cur.cached === null) continue;
    ++nChecked;
    if (cur.cached >= prev.prompt + prev.completion - 16) ++nMeeting;
  }
}
const completion = all.reduce((a, r) => a + r.completion, 0);
const itl = all.flatMap((r) => r.itl);
process.stdout.write(JSON.stringify({
  mode, conversations: nConv, turns: nTurns, n_requests: nRequests, n_ok: all.length, n_errors: errors.length,
  errors: errors.slice(0, 5), wall_s: wallS, completion_tokens: completion, completion_tok_per_s: completion / wallS,
  ttft_p50_ms: percentile(all.map((r) => r.ttft_ms), 50), ttft_p99_ms: percentile(all.map((r) => r.ttft_ms), 99),
  itl_p50_ms: percentile(itl, 50), itl_p99_ms: percentile(itl, 99), itl_n: itl.length,
  content_chunks: all.reduce((a, r) => a + r.n_chunks, 0),
  answers_with_tokens: all.filter((r) => r.completion > 0).length,
  per_turn: perTurn, cache_criterion: { checked: nChecked, met: nMeeting },
}) + '\n');
if (errors.length > 0) process.exitCode = 1;
