// The official TypeScript SDK client (@modelcontextprotocol/sdk, pinned in package.json), driven by
// the Rust integration tests: it connects to one MCP server, runs a list of operations and prints
// one JSON line per operation on stdout. Errors of an operation are printed, not thrown, so a test
// can assert on a refusal.
//
//   node ts-client.mjs --ops '<json array>' --stdio <command> [args...]
//   node ts-client.mjs --ops '<json array>' --http <url> [--token <bearer token>]
//
// Operations:
//   {"op": "list"}                                   -> {"op":"list","result":{tools, ...}}
//   {"op": "call", "name": "x", "arguments": {...}, "meta": {...}?}  -> {"op":"call","result":{...}}
//                                                    or {"op":"call","error":{code,message,data}}
//     with "progress": true, the call asks for progress (the SDK's `onprogress`) and the line
//     has "progress": [each notification's params, in order]
//   {"op": "waitListChanged", "timeoutMs": 5000}     -> {"op":"waitListChanged","changed":true|false}
// The first line is {"op":"connect","serverInfo":..,"protocolVersion":..}; a failure to connect
// prints {"op":"connect","error":..} and exits 1.
//
// This file is copied next to the installed node_modules by the tests (ES modules resolve packages
// from the importing file's directory).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

function usage(message) {
  process.stderr.write(`ts-client: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = { ops: [], token: undefined, http: undefined, stdio: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--ops') {
      try {
        options.ops = JSON.parse(argv[++i]);
      } catch (e) {
        usage(`--ops is not JSON: ${e.message}`);
      }
    } else if (arg === '--token') {
      options.token = argv[++i];
    } else if (arg === '--http') {
      options.http = argv[++i];
    } else if (arg === '--stdio') {
      options.stdio = argv.slice(i + 1);
      break;
    } else {
      usage(`unknown argument ${arg}`);
    }
  }
  if (!options.http && !(options.stdio && options.stdio.length > 0)) {
    usage('give --http <url> or --stdio <command> [args...]');
  }
  return options;
}

function print(line) {
  process.stdout.write(JSON.stringify(line) + '\n');
}

function errorJson(e) {
  return { code: e?.code ?? null, message: String(e?.message ?? e), data: e?.data ?? null };
}

const options = parseArgs(process.argv.slice(2));
const transport = options.http
  ? new StreamableHTTPClientTransport(new URL(options.http), {
      requestInit: options.token ? { headers: { Authorization: `Bearer ${options.token}` } } : {},
    })
  : new StdioClientTransport({
      command: options.stdio[0],
      args: options.stdio.slice(1),
      stderr: 'inherit',
    });

// CAPABILITY_TS_ELICIT=accept|refuse|decline: the client declares form elicitation and its
// "human" answers every request so (accept: {allow: true}; refuse: accept with {allow: false});
// each request is printed as {"op":"elicited","message":..,"schema":..}.
const elicit = process.env.CAPABILITY_TS_ELICIT;
const client = new Client(
  { name: 'capability-ts-client', version: '0.0.0' },
  elicit ? { capabilities: { elicitation: { form: {} } } } : undefined,
);
if (elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    print({ op: 'elicited', message: request.params.message, schema: request.params.requestedSchema });
    if (elicit === 'decline') return { action: 'decline' };
    return { action: 'accept', content: { allow: elicit === 'accept' } };
  });
}
let listChanged = 0;
let wakeListChanged = null;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  listChanged += 1;
  if (wakeListChanged) wakeListChanged();
});

try {
  await client.connect(transport);
  print({
    op: 'connect',
    serverInfo: client.getServerVersion() ?? null,
    protocolVersion: transport.protocolVersion ?? null,
  });
} catch (e) {
  print({ op: 'connect', error: errorJson(e) });
  process.exit(1);
}

for (const op of options.ops) {
  try {
    if (op.op === 'list') {
      print({ op: 'list', result: await client.listTools() });
    } else if (op.op === 'call') {
      const params = { name: op.name, arguments: op.arguments ?? {} };
      if (op.meta) params._meta = op.meta;
      if (op.progress) {
        const progress = [];
        const result = await client.callTool(params, undefined, {
          onprogress: (p) => progress.push(p),
        });
        print({ op: 'call', name: op.name, result, progress });
      } else {
        const result = await client.callTool(params);
        print({ op: 'call', name: op.name, result });
      }
    } else if (op.op === 'resources') {
      print({ op: 'resources', result: await client.listResources() });
    } else if (op.op === 'templates') {
      print({ op: 'templates', result: await client.listResourceTemplates() });
    } else if (op.op === 'read') {
      print({ op: 'read', uri: op.uri, result: await client.readResource({ uri: op.uri }) });
    } else if (op.op === 'prompts') {
      print({ op: 'prompts', result: await client.listPrompts() });
    } else if (op.op === 'prompt') {
      const result = await client.getPrompt({ name: op.name, arguments: op.arguments ?? {} });
      print({ op: 'prompt', name: op.name, result });
    } else if (op.op === 'waitListChanged') {
      if (listChanged === 0) {
        await new Promise((resolve) => {
          wakeListChanged = resolve;
          setTimeout(resolve, op.timeoutMs ?? 5000);
        });
      }
      print({ op: 'waitListChanged', changed: listChanged > 0 });
      listChanged = 0;
      wakeListChanged = null;
    } else {
      print({ op: op.op, error: { code: null, message: `unknown op ${op.op}`, data: null } });
    }
  } catch (e) {
    print({ op: op.op, name: op.name, error: errorJson(e) });
  }
}

await client.close();
process.exit(0);
