// Times `echo` calls of the official TypeScript SDK client over Streamable HTTP, for the
// benchmark of `capability proxy --listen` (capability-cli/benches/proxy_http.rs).
//
//   node ts-latency.mjs <url> <calls> [<bearer token>]
//
// Prints one JSON line: {"calls": n, "p50_us": .., "p99_us": ..} after 50 calls of warm-up.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, count, token] = process.argv.slice(2);
const calls = Number(count);
if (!url || !Number.isInteger(calls) || calls < 1) {
  process.stderr.write('usage: node ts-latency.mjs <url> <calls> [<bearer token>]\n');
  process.exit(2);
}
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const client = new Client({ name: 'ts-latency', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
const echo = { name: 'echo', arguments: { message: 'bench' } };
for (let i = 0; i < 50; i++) await client.callTool(echo);
const times = [];
for (let i = 0; i < calls; i++) {
  const start = process.hrtime.bigint();
  await client.callTool(echo);
  times.push(Number(process.hrtime.bigint() - start) / 1000);
}
times.sort((a, b) => a - b);
const at = (p) => times[Math.min(times.length - 1, Math.round((times.length - 1) * p))];
process.stdout.write(`${JSON.stringify({ calls, p50_us: Math.round(at(0.5)), p99_us: Math.round(at(0.99)) })}\n`);
await client.close();
