// Times `echo` calls (and `tools/list`) of the official TypeScript SDK client, for the
// benchmarks of `capability proxy --listen` (capability-cli/benches/proxy_http.rs, over
// Streamable HTTP) and of `capability gateway` (capability-cli/benches/gateway_overhead.rs, over
// stdio, against the server straight and behind a plain byte relay).
//
//   node ts-latency.mjs <url> <calls> [<bearer token>]
//   node ts-latency.mjs --stdio <calls> <command> [args...]
//   node ts-latency.mjs --interleaved <calls> -- <command> [args...] [-- <command> [args...]]...
//   (a command that is an http:// or https:// URL is a Streamable HTTP endpoint: `-- <url> [<token>]`)
//
// Prints one JSON line after 50 calls of warm-up: {"calls": n, "p50_us": .., "p99_us": ..,
// "list_p50_us": ..} (the list timed over n / 10 rounds).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const argv = process.argv.slice(2);
if (argv[0] === '--interleaved') {
  await interleaved(argv.slice(1));
  process.exit(0);
}
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

// `--interleaved`: one client per command (or URL), all connected at once, and the calls taken in turns
// (each turn visits every path once, in an order shuffled anew each turn), so whatever the
// machine does over the run falls on every path alike. Prints one JSON line: {"calls": n,
// "paths": [{"p50_us", "p99_us", "list_p50_us", "p50_by_tenth"}, ...]} in the commands' order
// (each path's p50 over each tenth of the run too: how much the machine drifted meanwhile).
async function interleaved(rest) {
  const calls = Number(rest[0]);
  const commands = [];
  for (const word of rest.slice(1)) {
    if (word === '--') commands.push([]);
    else if (commands.length) commands[commands.length - 1].push(word);
  }
  if (!Number.isInteger(calls) || calls < 1 || commands.length < 1 || commands.some((c) => !c.length)) {
    process.stderr.write('usage: node ts-latency.mjs --interleaved <calls> -- <command> [args...] | <url> [<token>] [-- ...]\n');
    process.exit(2);
  }
  const clients = [];
  for (const [command, ...args] of commands) {
    const client = new Client({ name: 'ts-latency', version: '1.0.0' });
    // A path that is a URL is a Streamable HTTP endpoint (its bearer token, if any, next).
    const http = /^https?:\/\//.test(command);
    const headers = http && args[0] ? { Authorization: `Bearer ${args[0]}` } : {};
    await client.connect(
      http
        ? new StreamableHTTPClientTransport(new URL(command), { requestInit: { headers } })
        : new StdioClientTransport({ command, args, stderr: 'inherit' }),
    );
    clients.push(client);
  }
  const echo = { name: 'echo', arguments: { message: 'bench' } };
  for (let i = 0; i < 50; i++) for (const client of clients) await client.callTool(echo);
  // A small fixed generator: the same orders in every run.
  let seed = 12345;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
  const order = clients.map((_, i) => i);
  const shuffle = () => {
    for (let i = order.length - 1; i > 0; i--) {
      const j = next() % (i + 1);
      [order[i], order[j]] = [order[j], order[i]];
    }
  };
  const time = async (run) => {
    const start = process.hrtime.bigint();
    await run();
    return Number(process.hrtime.bigint() - start) / 1000;
  };
  const times = clients.map(() => []);
  for (let turn = 0; turn < calls; turn++) {
    shuffle();
    for (const i of order) times[i].push(await time(() => clients[i].callTool(echo)));
  }
  const lists = clients.map(() => []);
  for (let turn = 0; turn < Math.max(1, Math.floor(calls / 10)); turn++) {
    shuffle();
    for (const i of order) lists[i].push(await time(() => clients[i].listTools()));
  }
  const quantile = (values, p) => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.round((sorted.length - 1) * p))];
  };
  const tenth = Math.max(1, Math.floor(calls / 10));
  const paths = times.map((t, i) => ({
    p50_us: Math.round(quantile(t, 0.5)),
    p99_us: Math.round(quantile(t, 0.99)),
    list_p50_us: Math.round(quantile(lists[i], 0.5)),
    p50_by_tenth: Array.from({ length: Math.floor(t.length / tenth) }, (_, k) =>
      Math.round(quantile(t.slice(k * tenth, (k + 1) * tenth), 0.5)),
    ),
  }));
  process.stdout.write(`${JSON.stringify({ calls, paths })}\n`);
  for (const client of clients) await client.close();
}
