// Runs the MCP conformance suite's server scenarios for one spec revision against a URL and
// writes a summary JSON. Run it from a copy next to the installed node_modules (see README.md):
//
//   node run.mjs --url http://127.0.0.1:3000/mcp --requirements 2025-11-25 --out summary.json
//
// Options:
//   --url <url>              the MCP endpoint under test (required)
//   --requirements <rev>     the spec revision whose requirement set to run, e.g. 2025-11-25 or
//                            2026-07-28 (required)
//   --out <file>             where to write the summary JSON (required; also the first positional
//                            argument)
//   --results-dir <dir>      where the runner writes its per-scenario checks.json (default
//                            <out without .json>-results/, emptied first)
//   --log <file>             the runner's standard output and error (default <out without .json>.log)
//   --timeout <seconds>      kill the runner after this long (default 900)
//   --scenarios <a,b,...>    run only these scenarios of the requirement set, one runner each
//                            (`--scenario <name>`), in turn; the summary counts only them
//
// With CONFORMANCE_BEARER set, preload.mjs adds `Authorization: Bearer <token>` to the runner's
// requests to the URL under test.
//
// The runner is `conformance server --url <url> --requirements <rev> -o <results-dir>` under
// `node --import preload.mjs`. It writes <results-dir>/server-<scenario>-<timestamp>/checks.json
// per scenario (a JSON array of checks, each {id, name, description, status: SUCCESS | FAILURE |
// WARNING | INFO | SKIPPED, errorMessage?, ...}); a scenario that threw leaves its folder without
// checks.json. Its exit code is 1 when a scored scenario has a FAILURE check, else 0.
//
// The summary:
//   {
//     "revision": "2025-11-25", "url": ..., "runner_exit_code": 0, "duration_s": 42.1,
//     "scenarios": {"<name>": "passed" | "failed" | "error" | "not_run", ...},   // every scenario run
//     "scored": [names],          // the revision's required server scenarios
//     "not_scored": {"<name>": "<reason>"},   // run and reported, never scored
//     "passed": n, "total": m,    // over the scored scenarios
//     "all_passed": n, "all_total": m,        // over every scenario run
//     "failures": {"<name>": [{"id", "name", "message"}]},   // FAILURE checks (or the error)
//     "warnings": {"<name>": [{"id", "name", "message"}]},
//     "checks": {"<name>": {"success": n, "failure": n, "warning": n}},
//     "results_dir": ..., "log": ...
//   }
// A scenario passes when it has a checks.json and no FAILURE check (the runner's own rule);
// WARNING checks do not fail it. The script exits 0 when it wrote the summary, whatever the
// counts, and 2 when it could not (bad arguments, the runner did not start, no results).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parse as parseYaml } from 'yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const RUNNER = path.join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const REQUIREMENTS_DIR = path.join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'requirements');
const PRELOAD = path.join(here, 'preload.mjs');

function usage(message) {
  console.error(`run.mjs: ${message}`);
  console.error('usage: node run.mjs --url <url> --requirements <rev> --out <summary.json> [--results-dir <dir>] [--log <file>] [--timeout <seconds>] [--scenarios <a,b,...>]');
  process.exit(2);
}

const opts = { timeout: '900' };
const positional = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i];
  const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
  if (!m) {
    positional.push(arg);
    continue;
  }
  const key = m[1];
  if (!['url', 'requirements', 'out', 'results-dir', 'log', 'timeout', 'scenarios'].includes(key)) usage(`unknown option --${key}`);
  const value = m[2] ?? argv[++i];
  if (value === undefined) usage(`--${key} wants a value`);
  opts[key] = value;
}
if (!opts.out && positional.length > 0) opts.out = positional.shift();
if (positional.length > 0) usage(`unexpected argument ${positional[0]}`);
for (const key of ['url', 'requirements', 'out']) if (!opts[key]) usage(`--${key} is required`);
const timeoutS = Number(opts.timeout);
if (!(timeoutS > 0)) usage(`--timeout wants a positive number of seconds, got ${opts.timeout}`);
if (!fs.existsSync(RUNNER)) usage(`the conformance runner is not installed next to this script (${RUNNER}); see README.md`);

const requirementsFile = path.join(REQUIREMENTS_DIR, `${opts.requirements}.yaml`);
if (!fs.existsSync(requirementsFile)) {
  const known = fs.readdirSync(REQUIREMENTS_DIR).filter((f) => f.endsWith('.yaml')).map((f) => f.slice(0, -5));
  usage(`no requirement set ${opts.requirements} (known: ${known.join(', ')})`);
}
const requirements = parseYaml(fs.readFileSync(requirementsFile, 'utf8'));
const only = opts.scenarios?.split(',').map((n) => n.trim()).filter((n) => n.length > 0);
const chosen = (name) => only === undefined || only.includes(name);
const scored = [...(requirements.server ?? [])].filter(chosen);
const notScored = Object.fromEntries(
  (requirements.not_scored ?? [])
    .filter((e) => e.leg === 'server' && chosen(e.scenario))
    .map((e) => [e.scenario, e.reason]),
);
const expected = [...scored, ...Object.keys(notScored)];
for (const name of only ?? []) {
  if (!expected.includes(name)) usage(`no server scenario ${name} in the requirement set ${opts.requirements}`);
}

const outPath = path.resolve(opts.out);
const stem = outPath.replace(/\.json$/, '');
const resultsDir = path.resolve(opts['results-dir'] ?? `${stem}-results`);
const logPath = path.resolve(opts.log ?? `${stem}.log`);
fs.mkdirSync(path.dirname(outPath), { recursive: true });
fs.rmSync(resultsDir, { recursive: true, force: true });
fs.mkdirSync(resultsDir, { recursive: true });
fs.mkdirSync(path.dirname(logPath), { recursive: true });

// --- run the runner ---------------------------------------------------------------------------

// The whole requirement set in one run, or each chosen scenario in a run of its own.
const selections = only === undefined ? [['--requirements', opts.requirements]] : only.map((n) => ['--scenario', n]);
const started = Date.now();
const log = fs.openSync(logPath, 'w');
let child = null;
let timedOut = false;
const timer = setTimeout(() => {
  timedOut = true;
  child?.kill('SIGKILL');
}, timeoutS * 1000);
const forward = (signal) => () => {
  child?.kill(signal);
  process.exit(130);
};
process.on('SIGINT', forward('SIGINT'));
process.on('SIGTERM', forward('SIGTERM'));

let exitCode = 0;
for (const selection of selections) {
  if (timedOut) break;
  const args = ['--import', pathToFileURL(PRELOAD).href, RUNNER, 'server', '--url', opts.url, ...selection, '-o', resultsDir];
  fs.writeSync(log, `$ ${[process.execPath, ...args].join(' ')}\n`);
  child = spawn(process.execPath, args, { cwd: here, stdio: ['ignore', log, log], env: process.env });
  const code = await new Promise((resolve) => {
    child.on('error', (e) => {
      console.error(`run.mjs: could not start the runner: ${e.message}`);
      resolve(null);
    });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? `signal ${signal}` : null)));
  });
  if (code === null) process.exit(2);
  // The first exit that is not 0 is the run's.
  if (exitCode === 0) exitCode = code;
}
clearTimeout(timer);
fs.closeSync(log);
const durationS = Math.round((Date.now() - started) / 100) / 10;

// --- read the results -------------------------------------------------------------------------

const logText = fs.readFileSync(logPath, 'utf8');
// "Failed to run scenario <name>: <error>" is what the runner prints when a scenario throws.
function thrownError(name) {
  const line = logText.split('\n').find((l) => l.startsWith(`Failed to run scenario ${name}:`));
  return line ? line.slice(`Failed to run scenario ${name}:`.length).trim() : 'the scenario wrote no checks.json (see the log)';
}

const dirs = {};
for (const entry of fs.readdirSync(resultsDir, { withFileTypes: true })) {
  const m = /^server-(.+)-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)$/.exec(entry.name);
  if (entry.isDirectory() && m) dirs[m[1]] = path.join(resultsDir, entry.name);
}
const names = [...expected, ...Object.keys(dirs).filter((n) => !expected.includes(n)).sort()];

const brief = (c) => ({
  id: c.id,
  name: c.name,
  message: String(c.errorMessage ?? c.description ?? '').trim(),
});
const scenarios = {};
const checkCounts = {};
const failures = {};
const warnings = {};
for (const name of names) {
  const dir = dirs[name];
  if (!dir) {
    scenarios[name] = 'not_run';
    continue;
  }
  const checksFile = path.join(dir, 'checks.json');
  if (!fs.existsSync(checksFile)) {
    scenarios[name] = 'error';
    failures[name] = [{ id: name, name, message: thrownError(name) }];
    continue;
  }
  let checks;
  try {
    checks = JSON.parse(fs.readFileSync(checksFile, 'utf8'));
  } catch (e) {
    scenarios[name] = 'error';
    failures[name] = [{ id: name, name, message: `unreadable checks.json: ${e.message}` }];
    continue;
  }
  const failed = checks.filter((c) => c.status === 'FAILURE');
  const warned = checks.filter((c) => c.status === 'WARNING');
  scenarios[name] = failed.length > 0 ? 'failed' : 'passed';
  checkCounts[name] = {
    success: checks.filter((c) => c.status === 'SUCCESS').length,
    failure: failed.length,
    warning: warned.length,
  };
  if (failed.length > 0) failures[name] = failed.map(brief);
  if (warned.length > 0) warnings[name] = warned.map(brief);
}

if (Object.keys(dirs).length === 0) {
  console.error(`run.mjs: the runner (exit ${exitCode}${timedOut ? ', killed after the timeout' : ''}) wrote no results; see ${logPath}`);
  process.exit(2);
}

const passedOf = (list) => list.filter((n) => scenarios[n] === 'passed').length;
const summary = {
  revision: opts.requirements,
  url: opts.url,
  runner_exit_code: exitCode,
  timed_out: timedOut,
  duration_s: durationS,
  scenarios,
  scored,
  not_scored: notScored,
  passed: passedOf(scored),
  total: scored.length,
  all_passed: passedOf(names),
  all_total: names.length,
  failures,
  warnings,
  checks: checkCounts,
  results_dir: resultsDir,
  log: logPath,
};
fs.writeFileSync(outPath, `${JSON.stringify(summary, null, 2)}\n`);

for (const name of names) {
  const tag = name in notScored ? ` (not scored: ${notScored[name]})` : '';
  console.log(`${scenarios[name].padEnd(7)} ${name}${tag}`);
  for (const f of failures[name] ?? []) console.log(`        ${f.id}: ${f.message.split('\n')[0].slice(0, 300)}`);
}
console.log(
  `conformance ${opts.requirements}: ${summary.passed}/${summary.total} scored scenarios passed` +
    ` (${summary.all_passed}/${summary.all_total} with the not-scored ones) in ${durationS}s; runner exit ${exitCode}; summary ${outPath}`,
);
