// An OAuth 2.1 authorization server for the tests of capability as an OAuth resource server, built
// on oidc-provider (pinned in package.json). client_credentials only; every access token is an
// RFC 9068 JWT (`typ: at+jwt`) whose `aud` is the RFC 8707 resource indicator of the request.
//
//   node auth-server.mjs <config.json>
//
// config.json:
//   {
//     "port": 0,                       0: a free port on 127.0.0.1; a fixed port works too
//     "clients": [{"client_id": "viewer-client", "client_secret": "s1",
//                  "scope": "mcp:read k8s:read",   the scopes the client may be granted
//                  "alg": "ES256",                 RS256 | ES256 | EdDSA (or the alg of a loaded key)
//                  "ttl": 300,                     access token lifetime in seconds (default 300)
//                  "exchange": false}],            true: may exchange tokens (RFC 8693, below)
//     "scopes": ["mcp:read", "mcp:write", "k8s:read"],   default: every client's scopes
//     "exchange_log": "/path/log"      optional: each token exchange appends the subject's `sub`
//                                      and a newline there
//     "keys": "/path/jwks.json"        optional: load the private JWKS from there if the file
//                                      exists, else generate and write it there
//   }
//
// The issuer is `http://127.0.0.1:<port>`; discovery at /.well-known/openid-configuration and
// /.well-known/oauth-authorization-server (RFC 8414, same document), the public keys at the
// `jwks_uri` of discovery (/jwks), tokens at /token (client_secret_basic or client_secret_post).
//
// A token request that names a `resource` (any absolute URL, one) gets a JWT access token with
// `aud` = the resource, signed with the client's `alg`. A request without `resource` does not fail:
// oidc-provider issues an opaque token (no audience, of no use to a resource server that wants a
// JWT). The JWT's `sub` is the client id (oidc-provider's choice for client_credentials, there is
// no end user), like `client_id`. Granted scope: the requested scopes that the
// client's registered `scope` allows (unknown or unregistered ones are dropped); a request without
// `scope` gets the client's registered scope; a request none of whose scopes is allowed fails with
// `invalid_scope`.
//
// RFC 8693 token exchange (oidc-provider ships none; it is registered here as a grant type): a
// client registered with `"exchange": true` (client_secret_post or basic) posts
// `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`, a `subject_token` (an access token
// this server issued, still valid), `subject_token_type=urn:ietf:params:oauth:token-type:access_token`
// and an `audience` (or `resource`); it gets a JWT access token for that audience with the subject
// token's `sub` and `scope`, `client_id` = the exchanging client, `act: {"sub": <that client>}`,
// expiring with the subject token at the latest.
//
// Stdout: exactly one line, `auth-server listening on http://127.0.0.1:<port>`. Errors and refused
// token requests are logged to stderr. SIGTERM or SIGINT: exits 0.
//
// This file is copied next to the installed node_modules by the tests (ES modules resolve packages
// from the importing file's directory).
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';

import { SignJWT, createLocalJWKSet, exportJWK, generateKeyPair, importJWK, jwtVerify } from 'jose';

// SIGTERM or SIGINT: exit 0, also while starting.
let server;
function stop() {
  if (server) {
    server.close();
    server.closeAllConnections();
  }
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

function fail(message) {
  process.stderr.write(`auth-server: ${message}\n`);
  process.exit(2);
}

// Stdout carries only the "listening" line: oidc-provider writes its notices with console.info,
// so those go to stderr too. The one warning it prints on Node.js 20 ("Unsupported runtime. Use
// Node.js v22.x LTS", printed when the module loads) is dropped: the tests run on Node.js 20+.
const toStderr = (...args) => console.error(...args);
console.log = toStderr;
console.info = toStderr;
const warn = console.warn.bind(console);
console.warn = (...args) => {
  if (typeof args[0] === 'string' && args[0].includes('Unsupported runtime')) return;
  warn(...args);
};
// Imported after the console is set up, since it warns when it loads.
const { default: Provider, errors } = await import('oidc-provider');

// --- configuration ---------------------------------------------------------------------------

if (process.argv.length !== 3) fail('usage: node auth-server.mjs <config.json>');
let config;
try {
  config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
} catch (e) {
  fail(`cannot read the config ${process.argv[2]}: ${e.message}`);
}
const port = config.port ?? 0;
if (!Number.isInteger(port) || port < 0 || port > 65535) fail('"port" must be an integer 0-65535');
if (!Array.isArray(config.clients) || config.clients.length === 0) {
  fail('"clients" must be a non-empty array');
}
const splitScope = (scope) => (typeof scope === 'string' ? scope.split(' ').filter(Boolean) : []);
const clients = config.clients.map((c, i) => {
  if (typeof c.client_id !== 'string' || !c.client_id) fail(`clients[${i}].client_id is missing`);
  if (typeof c.client_secret !== 'string' || !c.client_secret) {
    fail(`clients[${i}].client_secret is missing`);
  }
  const ttl = c.ttl ?? 300;
  if (!Number.isInteger(ttl) || ttl <= 0) fail(`clients[${i}].ttl must be a positive integer`);
  return {
    client_id: c.client_id,
    client_secret: c.client_secret,
    scope: splitScope(c.scope),
    alg: c.alg ?? 'RS256',
    ttl,
    exchange: c.exchange === true,
  };
});
const byId = new Map(clients.map((c) => [c.client_id, c]));
const scopes = Array.isArray(config.scopes)
  ? config.scopes
  : [...new Set(clients.flatMap((c) => c.scope))];
for (const c of clients) {
  const unknown = c.scope.filter((s) => !scopes.includes(s));
  if (unknown.length) fail(`client ${c.client_id}: scope ${unknown.join(' ')} is not in "scopes"`);
}

// --- signing keys ----------------------------------------------------------------------------

async function generateKeys() {
  const keys = [];
  for (const [alg, options] of [
    ['RS256', { modulusLength: 2048 }],
    ['ES256', {}],
    ['EdDSA', { crv: 'Ed25519' }],
  ]) {
    const { privateKey } = await generateKeyPair(alg, { ...options, extractable: true });
    const jwk = await exportJWK(privateKey);
    keys.push({ ...jwk, kid: randomBytes(12).toString('base64url'), alg, use: 'sig' });
  }
  return { keys };
}

let jwks;
if (config.keys !== undefined && typeof config.keys !== 'string') fail('"keys" must be a path');
if (config.keys && existsSync(config.keys)) {
  try {
    jwks = JSON.parse(readFileSync(config.keys, 'utf8'));
  } catch (e) {
    fail(`cannot read the keys ${config.keys}: ${e.message}`);
  }
  if (!Array.isArray(jwks?.keys) || jwks.keys.some((k) => !k.d)) {
    fail(`${config.keys} must be a private JWKS ({"keys": [...]}, private keys)`);
  }
} else {
  jwks = await generateKeys();
  if (config.keys) writeFileSync(config.keys, JSON.stringify(jwks, null, 2) + '\n', { mode: 0o600 });
}
const algs = new Set(jwks.keys.map((k) => k.alg).filter(Boolean));
for (const c of clients) {
  if (!algs.has(c.alg)) {
    fail(`client ${c.client_id}: no key for alg ${c.alg} (keys have ${[...algs].join(', ')})`);
  }
}

// --- token exchange (RFC 8693) ----------------------------------------------------------------

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const PRIVATE_PARTS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'];
const publicKeys = createLocalJWKSet({
  keys: jwks.keys.map((k) => Object.fromEntries(Object.entries(k).filter(([n]) => !PRIVATE_PARTS.includes(n)))),
});

async function tokenExchange(ctx) {
  const { client, params } = ctx.oidc;
  const registered = byId.get(client.clientId);
  if (!registered?.exchange) throw new errors.UnauthorizedClient('this client may not exchange tokens');
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(params.subject_token ?? '', publicKeys, { issuer }));
  } catch (e) {
    throw new errors.InvalidGrant(`the subject token is not valid: ${e.message}`);
  }
  const audience = params.audience ?? params.resource;
  if (!audience) throw new errors.InvalidTarget('name the token\'s audience (audience or resource)');
  const key = jwks.keys.find((k) => k.alg === registered.alg);
  const now = Math.floor(Date.now() / 1000);
  const exp = Math.min(subject.exp, now + registered.ttl);
  const claims = { client_id: client.clientId, act: { sub: client.clientId } };
  if (subject.scope) claims.scope = subject.scope;
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'at+jwt' })
    .setIssuer(issuer)
    .setSubject(subject.sub)
    .setAudience(audience)
    .setIssuedAt(now)
    .setExpirationTime(exp)
    .setJti(randomBytes(16).toString('base64url'))
    .sign(await importJWK(key, key.alg));
  process.stderr.write(`auth-server: ${client.clientId} exchanged a token of ${subject.sub} for ${audience}\n`);
  if (typeof config.exchange_log === 'string') appendFileSync(config.exchange_log, `${subject.sub}\n`);
  ctx.body = { access_token: token, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: exp - now };
}

// --- provider --------------------------------------------------------------------------------

// Nothing is kept across restarts; client_credentials stores next to nothing.
class MemoryAdapter {
  static store = new Map();

  constructor(model) {
    this.model = model;
  }

  key(id) {
    return `${this.model}:${id}`;
  }

  async upsert(id, payload, expiresIn) {
    const expiresAt = expiresIn ? Date.now() + expiresIn * 1000 : Infinity;
    MemoryAdapter.store.set(this.key(id), { payload, expiresAt });
  }

  async find(id) {
    const entry = MemoryAdapter.store.get(this.key(id));
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      MemoryAdapter.store.delete(this.key(id));
      return undefined;
    }
    return entry.payload;
  }

  async findByUid(uid) {
    for (const [key, { payload }] of MemoryAdapter.store) {
      if (key.startsWith(`${this.model}:`) && payload.uid === uid) return payload;
    }
    return undefined;
  }

  async findByUserCode(userCode) {
    for (const [key, { payload }] of MemoryAdapter.store) {
      if (key.startsWith(`${this.model}:`) && payload.userCode === userCode) return payload;
    }
    return undefined;
  }

  async consume(id) {
    const payload = await this.find(id);
    if (payload) payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    MemoryAdapter.store.delete(this.key(id));
  }

  async revokeByGrantId(grantId) {
    for (const [key, { payload }] of MemoryAdapter.store) {
      if (payload.grantId === grantId) MemoryAdapter.store.delete(key);
    }
  }
}

// Narrows the `scope` of a client_credentials request to what the client is registered for (the
// intersection; the registered scope when none is requested). oidc-provider itself refuses a
// request naming a known scope the client is not registered for, with invalid_scope; the tests
// want the intersection instead. Called from the resource indicator hooks, which run before the
// grant looks at the scope; idempotent.
function narrowScope(ctx, client) {
  const { params } = ctx.oidc;
  if (params.grant_type !== 'client_credentials') return;
  const registered = byId.get(client.clientId)?.scope ?? [];
  const requested = splitScope(params.scope);
  if (requested.length === 0) {
    params.scope = registered.join(' ') || undefined;
    return;
  }
  const granted = requested.filter((s) => registered.includes(s));
  if (granted.length === 0) {
    throw new errors.InvalidScope('none of the requested scopes is allowed for this client', params.scope);
  }
  params.scope = granted.join(' ');
}

server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
}).catch((e) => fail(`cannot listen on 127.0.0.1:${port}: ${e.message}`));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  adapter: MemoryAdapter,
  jwks,
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  clients: clients.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: c.exchange ? ['client_credentials', EXCHANGE] : ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: c.exchange ? 'client_secret_post' : 'client_secret_basic',
    scope: c.scope.join(' ') || undefined,
  })),
  scopes,
  clientAuthMethods: ['client_secret_basic', 'client_secret_post'],
  // No end-user flows: no authorization endpoint response types, no user-facing features.
  responseTypes: [],
  features: {
    devInteractions: { enabled: false },
    userinfo: { enabled: false },
    rpInitiatedLogout: { enabled: false },
    pushedAuthorizationRequests: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource(ctx, client) {
        narrowScope(ctx, client);
        return undefined;
      },
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, resourceIndicator, client) {
        narrowScope(ctx, client);
        const registered = byId.get(client.clientId);
        return {
          scope: scopes.join(' '),
          audience: resourceIndicator,
          accessTokenTTL: registered?.ttl ?? 300,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: registered?.alg ?? 'RS256' } },
        };
      },
    },
  },
  ttl: {
    ClientCredentials: (ctx, token, client) =>
      token.resourceServer?.accessTokenTTL ?? byId.get(client.clientId)?.ttl ?? 300,
  },
  clientBasedCORS: () => true,
  renderError(ctx, out) {
    ctx.type = 'json';
    ctx.body = out;
  },
});

provider.registerGrantType(EXCHANGE, tokenExchange, [
  'subject_token', 'subject_token_type', 'audience', 'resource', 'scope', 'requested_token_type',
]);

provider.on('server_error', (ctx, err) => {
  process.stderr.write(`auth-server: ${ctx.method} ${ctx.path}: ${err.stack ?? err}\n`);
});
provider.on('grant.error', (ctx, err) => {
  const client = ctx.oidc?.client?.clientId ?? ctx.oidc?.params?.client_id ?? '?';
  process.stderr.write(
    `auth-server: token request of ${client} refused: ${err.error}` +
      `${err.error_description ? ` (${err.error_description})` : ''}\n`,
  );
});

server.on('request', provider.callback());
server.removeAllListeners('error');
server.on('error', (e) => process.stderr.write(`auth-server: ${e.stack ?? e}\n`));

process.stdout.write(`auth-server listening on ${issuer}\n`);
