// An OAuth client of the official TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// package.json), driven by the Rust integration tests: it connects over Streamable HTTP to an MCP
// server that is an OAuth resource server, with the SDK's own client_credentials provider, so the
// SDK does the whole discovery itself: the 401's `WWW-Authenticate: Bearer resource_metadata=...`,
// the protected resource metadata (RFC 9728), the authorization server metadata (RFC 8414), then
// a token request with `resource` (RFC 8707) and client_secret_basic. It runs a list of operations
// and prints one JSON line per operation on stdout. Errors of an operation are printed, not
// thrown, so a test can assert on a refusal.
//
//   node ts-oauth-client.mjs <url> <ops.json>
//
// ops.json:
//   {"client_id": "viewer-client", "client_secret": "s1", "scope": "mcp:read k8s:read",
//    "issuer": "http://127.0.0.1:<port>",     the only authorization server the secret goes to
//    "ops": [{"op": "list"}, {"op": "call", "name": "echo", "arguments": {"message": "hi"}}]}
//
// Output:
//   {"op":"list","tools":["echo", ...]}
//   {"op":"call","name":"echo","result":<CallToolResult>}
//   {"op":"call","name":"echo","error":{"code":..,"message":..,"data":..,"status":..}}
// (`status`: the HTTP status the MCP endpoint refused the request with, e.g. 403, or null; for
// such a refusal the SDK's error `code` is that status too.)
// A failure to connect (including every OAuth failure while connecting) prints
// {"op":"connect","error":{"message":..,"status":<HTTP status or null>,"name":..,
// "oauth_error":<the token endpoint's error code, e.g. "invalid_client", or null>}} and exits 1;
// otherwise the exit status is 0.
//
// This file is copied next to the installed node_modules by the tests (ES modules resolve packages
// from the importing file's directory).
import { readFileSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';

function usage(message) {
  process.stderr.write(`ts-oauth-client: ${message}\n`);
  process.exit(2);
}

function print(line) {
  process.stdout.write(JSON.stringify(line) + '\n');
}

// A StreamableHTTPError (the MCP endpoint refused the HTTP request) carries the HTTP status in
// `code`; it is also given as `status`, null for a JSON-RPC error.
function errorJson(e) {
  return {
    code: e?.code ?? null,
    message: String(e?.message ?? e),
    data: e?.data ?? null,
    status: e instanceof StreamableHTTPError ? statusOf(e) : null,
  };
}

// The message, with its cause (fetch's "fetch failed" says why only in its cause).
function messageOf(e) {
  const message = String(e?.message ?? e);
  const cause = e?.cause?.message ?? e?.cause?.code;
  return cause ? `${message}: ${cause}` : message;
}

// The HTTP status of a failed connection, when the error tells it: a StreamableHTTPError carries
// it in `code`; an UnauthorizedError means the server kept answering 401.
function statusOf(e) {
  if (typeof e?.code === 'number' && e.code >= 100 && e.code < 600) return e.code;
  if (e instanceof UnauthorizedError) return 401;
  return null;
}

if (process.argv.length !== 4) usage('usage: node ts-oauth-client.mjs <url> <ops.json>');
const [url, opsPath] = process.argv.slice(2);
let spec;
try {
  spec = JSON.parse(readFileSync(opsPath, 'utf8'));
} catch (e) {
  usage(`cannot read ${opsPath}: ${e.message}`);
}
for (const key of ['client_id', 'client_secret', 'issuer']) {
  if (typeof spec[key] !== 'string') usage(`${opsPath}: "${key}" must be a string`);
}

const authProvider = new ClientCredentialsProvider({
  clientId: spec.client_id,
  clientSecret: spec.client_secret,
  scope: spec.scope,
  expectedIssuer: spec.issuer,
});
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
const client = new Client({ name: 'capability-ts-oauth-client', version: '0.0.0' });

try {
  await client.connect(transport);
} catch (e) {
  print({
    op: 'connect',
    error: {
      message: messageOf(e),
      status: statusOf(e),
      name: e?.name ?? null,
      oauth_error: e?.errorCode ?? null,
    },
  });
  process.exit(1);
}

for (const op of spec.ops ?? []) {
  try {
    if (op.op === 'list') {
      const { tools } = await client.listTools();
      print({ op: 'list', tools: tools.map((tool) => tool.name) });
    } else if (op.op === 'call') {
      const result = await client.callTool({ name: op.name, arguments: op.arguments ?? {} });
      print({ op: 'call', name: op.name, result });
    } else {
      print({
        op: op.op,
        error: { code: null, message: `unknown op ${op.op}`, data: null, status: null },
      });
    }
  } catch (e) {
    print({ op: op.op, name: op.name, error: errorJson(e) });
  }
}

await client.close();
process.exit(0);
