// Times `echo` calls (and `tools/list`) of the official TypeScript SDK client, for the
// benchmarks of `capability proxy --listen` (capability-cli/benches/proxy_http.rs, over
// Streamable HTTP) and of `capability gateway` (capability-cli/benches/gateway_overhead.rs, over
// stdio, against the server straight and behind a plain byte relay).
//
//   node ts-latency.mjs <url> <calls> [<bearer token>]
//   node ts-latency.mjs --stdio <calls> <command> [args...]
//
// Prints one JSON line after 50 calls of warm-up: {"calls": n, "p50_us": .., "p99_us": ..,
// "list_p50_us": ..} (the list timed over n / 10 rounds).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const argv = process.argv.slice(2);
let transport;
let calls;
if (argv[0] === '--stdio') {
  calls = Number(argv[1]);
  const [command, ...args] = argv.slice(2);
  if (!command || !Number.isInteger(calls) || calls < 1) {
    process.stderr.write('usage: node ts-latency.mjs --stdio <calls> <command> [args...]\n');
    process.exit(2);
  }
  transport = new StdioClientTransport({ command, args, stderr: 'inherit' });
} else {
  const [url, count, token] = argv;
  calls = Number(count);
  if (!url || !Number.isInteger(calls) || calls < 1) {
    process.stderr.write('usage: node ts-latency.mjs <url> <calls> [<bearer token>]\n');
    process.exit(2);
  }
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
}
const client = new Client({ name: 'ts-latency', version: '1.0.0' });
await client.connect(transport);
const echo = { name: 'echo', arguments: { message: 'bench' } };
for (let i = 0; i < 50; i++) await client.callTool(echo);
const timed = async (n, run) => {
  const times = [];
  for (let i = 0; i < n; i++) {
    const start = process.hrtime.bigint();
    await run();
    times.push(Number(process.hrtime.bigint() - start) / 1000);
  }
  times.sort((a, b) => a - b);
  return (p) => times[Math.min(times.length - 1, Math.round((times.length - 1) * p))];
};
const call = await timed(calls, () => client.callTool(echo));
const list = await timed(Math.max(1, Math.floor(calls / 10)), () => client.listTools());
process.stdout.write(
  `${JSON.stringify({ calls, p50_us: Math.round(call(0.5)), p99_us: Math.round(call(0.99)), list_p50_us: Math.round(list(0.5)) })}\n`,
);
await client.close();
