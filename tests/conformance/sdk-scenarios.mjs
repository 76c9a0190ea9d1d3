// The requests of the conformance suite's server scenarios of 2025-11-25, made by the official
// TypeScript SDK's client (the SDK the conformance project pins) to the reference server's tools,
// resources and prompts, over stdio or Streamable HTTP. One JSON line per scenario on standard
// output, {"scenario": .., "result": ..} or {"scenario": .., "error": ..}: what the client got,
// without what differs by the transport alone (request ids, the server's name).
//
//   node sdk-scenarios.mjs --http <url> [--token <bearer token>]
//   node sdk-scenarios.mjs --stdio <command> [args...]
//
// capability-cli/tests/it/conformance.rs runs it straight to the reference server and through
// `capability gateway --role` over stdio (the conformance runner speaks HTTP only), and compares
// the two, scenario by scenario. The client answers what a server asks as a client with a model,
// a human and roots would: sampling with a fixed text, every elicitation by accepting a value of
// each requested field's type (its default when it has one), roots with one root.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const argv = process.argv.slice(2);
let http;
let token;
let stdio;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--http') http = argv[++i];
  else if (argv[i] === '--token') token = argv[++i];
  else if (argv[i] === '--stdio') {
    stdio = argv.slice(i + 1);
    break;
  } else {
    process.stderr.write(`sdk-scenarios: unknown argument ${argv[i]}\n`);
    process.exit(2);
  }
}
if (!http && !(stdio && stdio.length > 0)) {
  process.stderr.write('sdk-scenarios: give --http <url> or --stdio <command> [args...]\n');
  process.exit(2);
}

const transport = http
  ? new StreamableHTTPClientTransport(new URL(http), {
      requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : {},
    })
  : new StdioClientTransport({ command: stdio[0], args: stdio.slice(1), stderr: 'inherit' });

const client = new Client(
  { name: 'sdk-scenarios', version: '1.0.0' },
  { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
);

client.setRequestHandler(CreateMessageRequestSchema, async () => ({
  model: 'scenario-model',
  role: 'assistant',
  content: { type: 'text', text: 'a sampled answer' },
}));

/// A value of each requested field: its default, else the first of its choices, else one of
/// its type.
function answer(schema) {
  const content = {};
  for (const [name, field] of Object.entries(schema?.properties ?? {})) {
    if (field.default !== undefined) content[name] = field.default;
    else if (Array.isArray(field.enum)) content[name] = field.enum[0];
    else if (Array.isArray(field.oneOf)) content[name] = field.oneOf[0].const;
    else if (field.type === 'array') {
      const items = field.items?.enum ?? (field.items?.anyOf ?? []).map((c) => c.const);
      content[name] = items.slice(0, 1);
    } else if (field.type === 'number' || field.type === 'integer') content[name] = 1;
    else if (field.type === 'boolean') content[name] = true;
    else if (field.format === 'email') content[name] = 'user@example.com';
    else content[name] = 'an answer';
  }
  return content;
}

client.setRequestHandler(ElicitRequestSchema, async (request) => ({
  action: 'accept',
  content: answer(request.params.requestedSchema),
}));
client.setRequestHandler(ListRootsRequestSchema, async () => ({
  roots: [{ uri: 'file:///srv/app', name: 'app' }],
}));

const logged = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  logged.push({ level: n.params.level, data: n.params.data });
});

function print(line) {
  process.stdout.write(JSON.stringify(line) + '\n');
}

async function scenario(name, run) {
  try {
    print({ scenario: name, result: await run() });
  } catch (e) {
    print({ scenario: name, error: { code: e?.code ?? null, message: String(e?.message ?? e) } });
  }
}

/// A result whose text echoes a JSON object (`... content={...}`), with that object's keys in
/// order: JSON objects are unordered, and each hop may write them in its own order.
function sortedEcho(result) {
  for (const item of result.content ?? []) {
    const at = typeof item.text === 'string' ? item.text.indexOf('content={') : -1;
    if (at < 0) continue;
    try {
      const object = JSON.parse(item.text.slice(at + 'content='.length));
      const keys = Object.keys(object).sort();
      item.text = item.text.slice(0, at) + 'content=' + JSON.stringify(object, keys);
    } catch {}
  }
  return result;
}

const sorted = (items, key) => [...items].sort((a, b) => String(a[key]).localeCompare(String(b[key])));
const call = (name, args = {}, options) => client.callTool({ name, arguments: args }, undefined, options);

try {
  await client.connect(transport);
} catch (e) {
  print({ scenario: 'connect', error: { message: String(e?.message ?? e) } });
  process.exit(1);
}

// Every message the client reads, in the order it reads them. The SDK's client runs a
// notification's handler a microtask after it reads it, but takes a response at once and forgets
// the call's progress handler with it: progress read in the same chunk as the response (a stdio
// hop writes the two back to back, in order) never reaches `onprogress`
// (typescript-sdk#2580, open). A scenario that compares progress reads it off this record
// instead: what the hop delivered, and in which order, not that race of the client's.
const wire = [];
const take = transport.onmessage;
transport.onmessage = (message, extra) => {
  wire.push(message);
  take?.(message, extra);
};
/// The progress (`progress`, `total`) read since `from` before the first answer read since then.
function progressBeforeAnswer(from) {
  const read = [];
  for (const message of wire.slice(from)) {
    if (message.id !== undefined && message.method === undefined) break;
    if (message.method === 'notifications/progress') {
      read.push({ progress: message.params.progress, total: message.params.total });
    }
  }
  return read;
}

await scenario('server-initialize', async () => ({
  tools: Boolean(client.getServerCapabilities()?.tools),
  resources: Boolean(client.getServerCapabilities()?.resources),
  prompts: Boolean(client.getServerCapabilities()?.prompts),
}));
await scenario('ping', () => client.ping());
await scenario('logging-set-level', () => client.setLoggingLevel('info'));
await scenario('tools-list', async () =>
  sorted((await client.listTools()).tools, 'name').map((t) => ({ name: t.name, inputSchema: t.inputSchema })),
);
for (const [name, tool] of [
  ['tools-call-simple-text', 'test_simple_text'],
  ['tools-call-image', 'test_image_content'],
  ['tools-call-audio', 'test_audio_content'],
  ['tools-call-embedded-resource', 'test_embedded_resource'],
  ['tools-call-mixed-content', 'test_multiple_content_types'],
  ['tools-call-error', 'test_error_handling'],
  ['tools-call-sampling', 'test_sampling'],
  ['tools-call-elicitation', 'test_elicitation'],
  ['elicitation-sep1034-defaults', 'test_elicitation_sep1034_defaults'],
  ['elicitation-sep1330-enums', 'test_elicitation_sep1330_enums'],
]) {
  await scenario(name, async () => sortedEcho(await call(tool, { prompt: 'a question', message: 'a question' })));
}
await scenario('tools-call-with-logging', async () => {
  // What the server logs from the level's change on (its note of the change may come before
  // or after the answer to `logging/setLevel`: both are kept).
  const from = logged.length;
  await client.setLoggingLevel('debug');
  const result = await call('test_tool_with_logging');
  return { result, logged: logged.slice(from) };
});
await scenario('tools-call-with-progress', async () => {
  const from = wire.length;
  const result = await call('test_tool_with_progress', {}, { onprogress: () => {} });
  // The tool answers with the progress token it was sent, which is each hop's own: only that
  // it answered is compared; the progress is what was read before the answer.
  return { answered: result.content?.[0]?.type, progress: progressBeforeAnswer(from) };
});
await scenario('resources-list', async () =>
  sorted((await client.listResources()).resources, 'uri').map((r) => r.uri),
);
await scenario('resources-read-text', () => client.readResource({ uri: 'test://static-text' }));
await scenario('resources-read-binary', () => client.readResource({ uri: 'test://static-binary' }));
await scenario('resources-templates-read', () =>
  client.readResource({ uri: 'test://template/123/data' }),
);
await scenario('resources-subscribe', () => client.subscribeResource({ uri: 'test://watched-resource' }));
await scenario('resources-unsubscribe', () =>
  client.unsubscribeResource({ uri: 'test://watched-resource' }),
);
await scenario('prompts-list', async () =>
  sorted((await client.listPrompts()).prompts, 'name').map((p) => p.name),
);
await scenario('prompts-get-simple', () => client.getPrompt({ name: 'test_simple_prompt' }));
await scenario('prompts-get-with-args', () =>
  client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'one', arg2: 'two' } }),
);
await scenario('prompts-get-embedded-resource', () =>
  client.getPrompt({
    name: 'test_prompt_with_embedded_resource',
    arguments: { resourceUri: 'test://static-text' },
  }),
);
await scenario('prompts-get-with-image', () => client.getPrompt({ name: 'test_prompt_with_image' }));
await scenario('completion-complete', () =>
  client.complete({
    ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
    argument: { name: 'arg1', value: 'o' },
  }),
);
await client.close();
