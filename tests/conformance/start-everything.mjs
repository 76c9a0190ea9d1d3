// Starts the conformance project's reference server, everything-server.ts (unchanged; see
// SOURCE.md), on Node.js 20+ with tsx, bound to 127.0.0.1:
//
//   node start-everything.mjs [--port N]      (default 0: a free port)
//
// When it listens it prints one line on standard error:
//
//   everything-server listening on http://127.0.0.1:<port>/mcp
//
// (The server itself reads PORT and prints `http://localhost:${PORT}`, which is wrong for port 0,
// and listens on every interface; this launcher passes PORT, adds the host 127.0.0.1 to its
// listen() call, and reports the port actually bound.) SIGTERM or SIGINT exits 0.
// Run it from a copy next to the installed node_modules (see README.md).

import http from 'node:http';
import { register } from 'tsx/esm/api';

const argv = process.argv.slice(2);
let port = '0';
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--port') port = argv[++i];
  else if (argv[i].startsWith('--port=')) port = argv[i].slice('--port='.length);
  else {
    console.error(`start-everything.mjs: unknown argument ${argv[i]}; usage: node start-everything.mjs [--port N]`);
    process.exit(2);
  }
}
if (!/^\d+$/.test(port)) {
  console.error(`start-everything.mjs: --port wants a number, got ${port}`);
  process.exit(2);
}
process.env.PORT = port;

const originalListen = http.Server.prototype.listen;
let announced = false;
http.Server.prototype.listen = function listenOnLoopback(...args) {
  // express's app.listen(PORT, cb) -> server.listen(PORT, cb): add the host.
  if ((typeof args[0] === 'number' || typeof args[0] === 'string') && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  }
  this.once('listening', () => {
    if (announced) return;
    announced = true;
    const address = this.address();
    console.error(`everything-server listening on http://127.0.0.1:${address.port}/mcp`);
  });
  return originalListen.apply(this, args);
};

for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));

register();
await import('./everything-server.ts');
