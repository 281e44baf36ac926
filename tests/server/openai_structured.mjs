// Structured outputs through the official openai npm client: response_format json_schema with
// chat.completions.parse (whole) and streamed, and a schema kvchat refuses; prints one JSON object.
//   usage: node openai_structured.mjs NODE_MODULES_DIR BASE_URL MODEL SCHEMA_JSON
import { createRequire } from 'node:module';

const [nodeModules, baseURL, model, schemaText] = process.argv.slice(2);
const require = createRequire(nodeModules.replace(/\/?$/, '/'));
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
const client = new OpenAI({ baseURL, apiKey: process.env.KVC_API_KEY ?? 'none', maxRetries: 0, timeout: 120000 });
const schema = JSON.parse(schemaText);
const messages = [{ role: 'user', content: 'Describe a part as JSON.' }];
const format = { type: 'json_schema', json_schema: { name: 'part', schema, strict: true } };

try {
  const parsed = [];
  for (const seed of [1, 2, 3, 4, 5]) {
    const r = await client.beta.chat.completions.parse({
      model, messages, response_format: format, temperature: 1, seed, max_tokens: 400,
    });
    const c = r.choices[0];
    parsed.push({ parsed: c.message.parsed, content: c.message.content, finish_reason: c.finish_reason });
  }
  const stream = await client.chat.completions.create({
    model, messages, response_format: format, temperature: 1, seed: 9, max_tokens: 400, stream: true,
  });
  let streamed = '', streamFinish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta?.content) streamed += c.delta.content;
      if (c.finish_reason) streamFinish = c.finish_reason;
    }
  }
  let refused = { status: 200 };
  try {
    await client.chat.completions.create({
      model, messages, max_tokens: 8,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'email' } } },
    });
  } catch (e) {
    refused = { status: e.status ?? -1, param: e.param ?? null, message: e.message };
  }
  console.log(JSON.stringify({ parsed, streamed, stream_finish: streamFinish, refused }));
} catch (e) {
  console.log(JSON.stringify({ failed: String(e?.stack ?? e) }));
}
