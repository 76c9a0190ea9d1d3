// Preload for the MCP conformance runner (@modelcontextprotocol/conformance), for Node.js 20+:
//
//   node --import ./preload.mjs node_modules/@modelcontextprotocol/conformance/dist/index.js server --url <url> ...
//
// It changes no installed file. It does two things:
//
// 1. Node 20 shim. The runner's bundle does `import { globSync, ... } from "fs"` (Node 22+; it
//    only uses it in `tier-check`), which fails to link on Node 20. A module.register() resolve
//    hook sends the runner's imports of `fs` / `node:fs` to a module that re-exports all of
//    node:fs and adds a small `globSync` (patterns with `*`, `**`, `?`; options `cwd`, `exclude`).
//    On a Node whose fs has globSync, nothing is redirected.
//
// 2. Bearer token. When CONFORMANCE_BEARER is set, every request the runner makes to the origin
//    of the URL under test (`--url` on the command line, or CONFORMANCE_BEARER_URL) gets
//    `Authorization: Bearer <token>`, unless the request already names an Authorization header.
//    Every other header is passed on as the runner wrote it. The runner sends requests three
//    ways, and all three are covered:
//    - globalThis.fetch (the SDK client transport and most scenarios): patched here;
//    - http.request / http.get (the SEP-2243 header scenarios, for exact header casing): patched;
//    - undici's request() (the dns-rebinding-protection scenario): the runner's import of
//      `undici` is resolved to a module that re-exports undici with `request` wrapped.
//    Requests to other origins (the runner's own mock servers, anything else) are untouched.
//
// The same file is the hooks module: register() loads it again in Node's loader thread, where
// only the exported hooks are used.

import { isMainThread } from 'node:worker_threads';

const SCHEME = 'capability-conformance-shim:';
const FS_SHIM = `${SCHEME}fs`;
const UNDICI_SHIM = `${SCHEME}undici`;
const HOOK_KEY = Symbol.for('capability.conformance.bearer');
// Only the conformance runner's own bundle is redirected.
const RUNNER_DIST = '/@modelcontextprotocol/conformance/dist/';

// ---------------------------------------------------------------------------------------------
// Loader hooks (run in the loader thread).

let hookData = { needGlobSync: false, bearer: false };

export async function initialize(data) {
  hookData = { ...hookData, ...(data ?? {}) };
}

export async function resolve(specifier, context, nextResolve) {
  const parent = context.parentURL ?? '';
  if (parent.includes(RUNNER_DIST)) {
    if (hookData.needGlobSync && (specifier === 'fs' || specifier === 'node:fs')) {
      return { url: FS_SHIM, shortCircuit: true };
    }
    if (hookData.bearer && specifier === 'undici') {
      const real = await nextResolve(specifier, context);
      return {
        url: `${UNDICI_SHIM}?real=${encodeURIComponent(real.url)}`,
        shortCircuit: true,
      };
    }
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  if (url === FS_SHIM) {
    return { format: 'module', source: FS_SHIM_SOURCE, shortCircuit: true };
  }
  if (url.startsWith(`${UNDICI_SHIM}?`)) {
    const real = new URL(url).searchParams.get('real');
    return { format: 'module', source: undiciShimSource(real), shortCircuit: true };
  }
  return nextLoad(url, context);
}

// node:fs plus a minimal globSync. Runs on the main thread like any module.
const FS_SHIM_SOURCE = `
import fs from 'node:fs';
import path from 'node:path';
export * from 'node:fs';
export default fs;

function toRegExp(pattern) {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*' && pattern[i + 1] === '*') {
      i++;
      if (pattern[i + 1] === '/') { i++; re += '(?:.*/)?'; } else { re += '.*'; }
    } else if (c === '*') {
      re += '[^/]*';
    } else if (c === '?') {
      re += '[^/]';
    } else {
      re += c.replace(/[.+^\${}()|[\\]\\\\]/g, '\\\\$&');
    }
  }
  return new RegExp('^' + re + '$');
}

export function globSync(pattern, options = {}) {
  const cwd = options.cwd === undefined ? process.cwd() : String(options.cwd);
  const patterns = (Array.isArray(pattern) ? pattern : [pattern]).map(String);
  const matchers = patterns.map(toRegExp);
  const exclude = typeof options.exclude === 'function' ? options.exclude : () => false;
  const out = [];
  const walk = (rel) => {
    let entries;
    try { entries = fs.readdirSync(path.join(cwd, rel), { withFileTypes: true }); } catch { return; }
    for (const e of entries) {
      const r = rel ? rel + '/' + e.name : e.name;
      if (exclude(options.withFileTypes ? e : r)) continue;
      if (matchers.some((m) => m.test(r))) out.push(options.withFileTypes ? e : r.split('/').join(path.sep));
      if (e.isDirectory()) walk(r);
    }
  };
  walk('');
  return out;
}
`;

function undiciShimSource(realUrl) {
  const real = JSON.stringify(realUrl);
  return `
import * as real from ${real};
export * from ${real};
export default real.default;
const hook = globalThis[Symbol.for('capability.conformance.bearer')];
export function request(url, options, ...rest) {
  return real.request(url, hook ? hook.undiciOptions(url, options) : options, ...rest);
}
`;
}

// ---------------------------------------------------------------------------------------------
// Main thread: register the hooks and patch the HTTP clients.

if (isMainThread && !globalThis[HOOK_KEY]) {
  const { register } = await import('node:module');
  const fs = await import('node:fs');
  const http = (await import('node:http')).default;
  const https = (await import('node:https')).default;

  const token = process.env.CONFORMANCE_BEARER || '';
  const targetUrl = process.env.CONFORMANCE_BEARER_URL || argValue('--url');
  let target = null;
  if (token) {
    if (!targetUrl) {
      console.error('preload.mjs: CONFORMANCE_BEARER is set but there is no --url (or CONFORMANCE_BEARER_URL)');
      process.exit(2);
    }
    target = new URL(targetUrl);
  }
  const authValue = `Bearer ${token}`;

  const defaultPort = (protocol) => (protocol === 'https:' ? '443' : '80');
  const sameOrigin = (u) => {
    if (!target) return false;
    let url;
    try {
      url = u instanceof URL ? u : new URL(String(u));
    } catch {
      return false;
    }
    return (
      url.protocol === target.protocol &&
      url.hostname.toLowerCase() === target.hostname.toLowerCase() &&
      (url.port || defaultPort(url.protocol)) === (target.port || defaultPort(target.protocol))
    );
  };

  // Headers in any of the shapes Node's clients accept: a plain object, a flat
  // [name, value, ...] array (http raw headers, undici), an array of pairs, a Headers.
  const hasAuthorization = (headers) => {
    if (!headers) return false;
    if (typeof headers.has === 'function' && typeof headers.get === 'function') {
      return headers.has('authorization');
    }
    if (Array.isArray(headers)) {
      if (headers.length > 0 && Array.isArray(headers[0])) {
        return headers.some(([k]) => String(k).toLowerCase() === 'authorization');
      }
      return headers.some((v, i) => i % 2 === 0 && String(v).toLowerCase() === 'authorization');
    }
    return Object.keys(headers).some((k) => k.toLowerCase() === 'authorization');
  };
  const withAuthorization = (headers) => {
    if (hasAuthorization(headers)) return headers;
    if (!headers) return { Authorization: authValue };
    if (Array.isArray(headers)) {
      if (headers.length > 0 && Array.isArray(headers[0])) return [...headers, ['Authorization', authValue]];
      return [...headers, 'Authorization', authValue];
    }
    if (typeof headers[Symbol.iterator] === 'function' && typeof headers.get !== 'function') {
      return [...headers, ['Authorization', authValue]];
    }
    return { ...headers, Authorization: authValue };
  };

  globalThis[HOOK_KEY] = {
    undiciOptions(url, options) {
      let u = url;
      if (u && typeof u === 'object' && !(u instanceof URL) && u.origin) u = new URL(u.path ?? '/', u.origin);
      if (!sameOrigin(u)) return options;
      return { ...(options ?? {}), headers: withAuthorization(options?.headers) };
    },
  };

  if (token) {
    // fetch
    const originalFetch = globalThis.fetch;
    globalThis.fetch = function fetchWithBearer(input, init) {
      const url = input instanceof Request ? input.url : input;
      if (!sameOrigin(url)) return originalFetch(input, init);
      const headers = new Headers(
        init && init.headers !== undefined ? init.headers : input instanceof Request ? input.headers : undefined,
      );
      if (headers.has('authorization')) return originalFetch(input, init);
      headers.set('authorization', authValue);
      return originalFetch(input, { ...(init ?? {}), headers });
    };

    // http.request / http.get (and https, for an https --url)
    const urlOfOptions = (options, protocol) => {
      const host = options.hostname ?? (options.host ? String(options.host).replace(/:\d+$/, '') : 'localhost');
      const port = options.port ?? defaultPort(options.protocol ?? protocol);
      const h = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
      return `${options.protocol ?? protocol}//${h}:${port}/`;
    };
    const patch = (mod, protocol) => {
      for (const name of ['request', 'get']) {
        const original = mod[name];
        mod[name] = function requestWithBearer(...args) {
          // (url[, options][, callback]) or (options[, callback])
          let url;
          let optionsIndex;
          if (typeof args[0] === 'string' || args[0] instanceof URL) {
            url = String(args[0]);
            optionsIndex = args[1] && typeof args[1] === 'object' ? 1 : -1;
          } else if (args[0] && typeof args[0] === 'object') {
            optionsIndex = 0;
            url = urlOfOptions(args[0], protocol);
          }
          if (url === undefined || !sameOrigin(url)) return original.apply(this, args);
          if (optionsIndex === -1) {
            args.splice(1, 0, { headers: { Authorization: authValue } });
          } else {
            args[optionsIndex] = {
              ...args[optionsIndex],
              headers: withAuthorization(args[optionsIndex].headers),
            };
          }
          return original.apply(this, args);
        };
      }
    };
    patch(http, 'http:');
    patch(https, 'https:');
  }

  register(import.meta.url, {
    data: {
      needGlobSync: typeof fs.globSync !== 'function',
      bearer: Boolean(token),
    },
  });
}

function argValue(name) {
  const argv = process.argv;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === name) return argv[i + 1];
    if (argv[i].startsWith(`${name}=`)) return argv[i].slice(name.length + 1);
  }
  return undefined;
}
