// Drives the approvals page of `capability gateway --listen` in Debian's Chromium, with
// puppeteer-core (pinned in package-lock.json) over the DevTools protocol, for
// capability-cli/tests/it/approvals_page.rs. The browser is the system's (`--chromium`); nothing
// is downloaded.
//
//   node approvals-page.mjs --chromium /usr/bin/chromium --url http://127.0.0.1:PORT/approvals \
//       --timezone Asia/Kolkata --ops '[...]'
//
// Operations, run in order in one page, each printing one JSON line:
//   {"op": "load", "token": T}              types the token, shows the proposals:
//                                           {"op", "http", "state", "text", "proposals": [ids]}
//   {"op": "read", "proposal": ID}          what the page shows of it: {"op", "title",
//                                           "fields": {id, proposer, rationale, created,
//                                           created_datetime, expires, arguments, approved, ...}}
//   {"op": "key", "file": PATH}             gives the page the key file: {"op", "state", "text"}
//   {"op": "approve", "proposal": ID}       clicks Approve: {"op", "state", "http", "text"}
//   {"op": "reject", "proposal": ID, "reason": R}  types the reason, clicks Reject: the same
// Last, {"op": "end", "errors": [...]}: the page's console errors, uncaught exceptions and
// Content-Security-Policy violations.
import { readFileSync } from "node:fs";
import puppeteer from "puppeteer-core";

function argument(name) {
  const at = process.argv.indexOf(name);
  if (at < 0 || at + 1 >= process.argv.length) {
    throw new Error(`missing ${name}`);
  }
  return process.argv[at + 1];
}

const chromium = argument("--chromium");
const url = argument("--url");
const timezone = argument("--timezone");
const ops = JSON.parse(argument("--ops"));

const print = (value) => process.stdout.write(JSON.stringify(value) + "\n");

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  // As root (CI), Chromium runs only without its sandbox.
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check"],
});
const errors = [];
// Every request the page makes, to show the approver's key is in none of them.
const requests = [];
const keys = [];
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(20_000);
  await page.emulateTimezone(timezone);
  page.on("console", (message) => {
    if (message.type() === "error") {
      errors.push(`console: ${message.text()}`);
    }
  });
  page.on("pageerror", (error) => errors.push(`exception: ${error.message}`));
  page.on("request", (request) => {
    requests.push(request.url() + JSON.stringify(request.headers()) + (request.postData() ?? ""));
  });
  await page.evaluateOnNewDocument(() => {
    document.addEventListener("securitypolicyviolation", (event) => {
      console.error(`CSP violation: ${event.violatedDirective} ${event.blockedURI}`);
    });
  });
  const opened = await page.goto(url, { waitUntil: "domcontentloaded" });
  const card = (id) => `article[data-proposal="${id}"]`;
  // The page says how a request went in an element's data-state (and data-http); wait for a
  // change of it after an action.
  const settled = async (selector, before) => {
    await page.waitForFunction(
      (s, b) => {
        const node = document.querySelector(s);
        return node && node.dataset.state && node.textContent !== b;
      },
      {},
      selector,
      before,
    );
    return page.$eval(selector, (node) => ({
      state: node.dataset.state,
      http: node.dataset.http ? Number(node.dataset.http) : null,
      text: node.textContent,
    }));
  };
  const text = (selector) => page.$eval(selector, (node) => node.textContent).catch(() => "");
  print({ op: "open", status: opened.status(), headers: opened.headers() });
  for (const op of ops) {
    if (op.op === "load") {
      const before = await text("#status");
      await page.$eval("#token", (input) => {
        input.value = "";
      });
      await page.type("#token", op.token);
      await page.click("#load");
      const said = await settled("#status", before);
      const proposals = await page.$$eval("article[data-proposal]", (cards) =>
        cards.map((c) => c.dataset.proposal),
      );
      print({ op: "load", ...said, proposals });
    } else if (op.op === "read") {
      const fields = await page.$eval(card(op.proposal), (article) => {
        const out = {};
        for (const node of article.querySelectorAll("[data-field]")) {
          out[node.dataset.field] = node.textContent;
        }
        const created = article.querySelector('[data-field="created"] time');
        out.created_datetime = created ? created.getAttribute("datetime") : null;
        return out;
      });
      print({ op: "read", title: await text(`${card(op.proposal)} h2`), fields });
    } else if (op.op === "key") {
      const before = await text("#key-status");
      keys.push(readFileSync(op.file, "utf8").trim().toLowerCase());
      const input = await page.$("#key-file");
      await input.uploadFile(op.file);
      print({ op: "key", ...(await settled("#key-status", before)) });
    } else if (op.op === "approve" || op.op === "reject") {
      const outcome = `${card(op.proposal)} .outcome`;
      const before = await text(outcome);
      if (op.op === "reject") {
        await page.type(`${card(op.proposal)} input.reason`, op.reason);
      }
      await page.click(`${card(op.proposal)} button.${op.op}`);
      print({ op: op.op, ...(await settled(outcome, before)) });
    } else {
      throw new Error(`unknown operation ${op.op}`);
    }
  }
  // What the key file held never left the page: it is in no request the page made.
  const sent = requests.filter((r) => keys.some((key) => r.toLowerCase().includes(key)));
  print({ op: "end", errors, requests: requests.length, key_sent: sent.length > 0 });
} catch (error) {
  print({ op: "failed", message: String(error && error.stack ? error.stack : error), errors });
  process.exitCode = 1;
} finally {
  await browser.close();
}
