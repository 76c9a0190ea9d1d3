// The approvals page of `capability gateway --listen` (served at /approvals).
//
// Every text of a proposal is written with textContent, never as HTML, with hidden and
// bidirectional characters shown as \u{..} (as the command line shows them). The approver's
// secret key stays in this page as a WebCrypto key that cannot be exported, and is never sent:
// only the signature is. The signed bytes are those `capability approve` signs: the tag
// "capability approval v3", a newline, and the canonical JSON (RFC 8785) of the approval's
// fields but its signature.
"use strict";

const state = { token: "", key: null, publicKey: "", data: null };

const $ = (id) => document.getElementById(id);

// What the command line escapes (capability_gateway::escape::is_hidden): controls, bidirectional
// controls, separators, zero-width and invisible characters.
const HIDDEN = new RegExp(
  "[\\u{0}-\\u{1f}\\u{7f}-\\u{9f}\\u{ad}\\u{34f}\\u{61c}\\u{115f}\\u{1160}\\u{17b4}\\u{17b5}" +
    "\\u{180e}\\u{200b}-\\u{200f}\\u{2028}\\u{2029}\\u{202a}-\\u{202e}\\u{2060}-\\u{2064}" +
    "\\u{2066}-\\u{2069}\\u{3164}\\u{fe00}-\\u{fe0f}\\u{feff}\\u{ffa0}\\u{fff9}-\\u{fffb}" +
    "\\u{1d173}-\\u{1d17a}\\u{e0000}-\\u{e007f}\\u{e0100}-\\u{e01ef}]",
  "gu",
);

/** Hidden characters as \u{..}. */
function unhide(text) {
  return text.replace(HIDDEN, (c) => "\\u{" + c.codePointAt(0).toString(16) + "}");
}

/** Text someone else wrote, safe to show: `\` doubled (no escape can be faked), hidden shown. */
function shown(value) {
  return unhide(String(value ?? "").replace(/\\/g, "\\\\"));
}

/** Canonical JSON (RFC 8785) of a value as JSON.parse gives it. */
function canonical(value) {
  if (value === null || typeof value !== "object") {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return "[" + value.map(canonical).join(",") + "]";
  }
  // The default sort compares UTF-16 code units, as RFC 8785 does.
  const keys = Object.keys(value).sort();
  return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
}

function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function fromBase64Url(text) {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

async function sha256(text) {
  return hex(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))));
}

function pad(n) {
  return String(n).padStart(2, "0");
}

/** A Unix time in the browser's local time, with its offset from UTC. */
function localTime(secs) {
  const d = new Date(secs * 1000);
  const offset = -d.getTimezoneOffset();
  const sign = offset >= 0 ? "+" : "-";
  const abs = Math.abs(offset);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ` +
    `(UTC${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)})`
  );
}

function element(tag, text, attributes = {}) {
  const node = document.createElement(tag);
  if (text !== undefined) {
    node.textContent = text;
  }
  for (const [name, value] of Object.entries(attributes)) {
    node.setAttribute(name, value);
  }
  return node;
}

function time(secs) {
  const iso = new Date(secs * 1000).toISOString();
  return element("time", localTime(secs), { datetime: iso, title: iso });
}

function say(node, text, ok, status) {
  node.textContent = text;
  node.dataset.state = ok ? "ok" : "error";
  if (status !== undefined) {
    node.dataset.http = String(status);
  }
}

/** One request of the page's API, with the token in the Authorization header (no cookie). */
async function api(path, body) {
  const init = {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: "Bearer " + state.token },
    credentials: "omit",
    cache: "no-store",
    redirect: "error",
  };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch("/approvals/api/" + path, init);
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  return { status: response.status, data };
}

async function load() {
  state.token = $("token").value.trim();
  const { status, data } = await api("proposals");
  const list = $("proposals");
  list.replaceChildren();
  if (status !== 200 || !data) {
    state.data = null;
    say($("status"), `${status}: ${shown(data && data.error ? data.error : "refused")}`, false, status);
    return;
  }
  state.data = data;
  const count = data.proposals.length;
  say(
    $("status"),
    `${count} proposal${count === 1 ? "" : "s"} waiting for ${shown(data.audience)}` +
      ` (you: ${shown(data.you.principal)}, role ${shown(data.you.role)})`,
    true,
    status,
  );
  for (const proposal of data.proposals) {
    list.append(card(proposal));
  }
  nameKey();
}

/** One proposal, every text of it through textContent. */
function card(p) {
  const file = p.proposal;
  const article = element("article", undefined, { "data-proposal": p.id });
  article.append(element("h2", `${shown(p.server)}/${shown(p.tool)}`));
  const facts = element("dl");
  const fact = (name, field, value) => {
    facts.append(element("dt", name));
    const dd = element("dd", undefined, { "data-field": field });
    dd.append(value instanceof Node ? value : document.createTextNode(value));
    facts.append(dd);
  };
  fact("Proposal", "id", shown(p.id));
  fact("Proposer", "proposer", shown(p.proposer));
  fact("Rationale", "rationale", shown(file.rationale || "(none given)"));
  fact("Proposed", "created", time(p.created_at));
  fact("Waits until", "expires", time(p.expires_at));
  fact("Tool type", "tool-type", shown(file.tool_type));
  fact("Descriptor", "descriptor", shown(file.descriptor_hash));
  fact("Arguments' digest", "digest", shown(file.args_digest));
  article.append(facts);
  article.append(element("h3", "Arguments"));
  const args = JSON.stringify(file.args, null, 2) ?? "null";
  // JSON already doubles backslashes and escapes controls inside strings: its line breaks are
  // its own, and only the other hidden characters are left to show.
  const lines = args.split("\n").map(unhide).join("\n");
  article.append(element("pre", lines, { "data-field": "arguments" }));
  const outcome = element("p", "", { class: "outcome" });
  if (p.approved) {
    article.append(
      element(
        "p",
        `Approved by ${shown(p.approved.approver)} (approval ${shown(p.approved.id)}, valid until ` +
          `${localTime(p.approved.expires_at)}): waiting for the agent's retry.`,
        { class: "approved", "data-field": "approved" },
      ),
    );
    article.append(outcome);
    return article;
  }
  const controls = element("div");
  const validity = element("select", undefined, { "aria-label": "valid for", class: "validity" });
  for (const [secs, label] of [
    [900, "valid 15 minutes"],
    [3600, "valid 1 hour"],
    [14400, "valid 4 hours"],
    [86400, "valid 24 hours"],
  ]) {
    if (secs <= state.data.max_validity_secs) {
      validity.append(element("option", label, { value: String(secs) }));
    }
  }
  validity.value = "3600";
  const approveButton = element("button", "Approve (sign with your key)", { type: "button", class: "approve" });
  approveButton.addEventListener("click", () => act(approveButton, outcome, () => approve(p, Number(validity.value))));
  const reason = element("input", undefined, { type: "text", class: "reason", placeholder: "why not", "aria-label": "why not" });
  const rejectButton = element("button", "Reject", { type: "button", class: "reject" });
  rejectButton.addEventListener("click", () => act(rejectButton, outcome, () => reject(p, reason.value)));
  controls.append(validity, approveButton, reason, rejectButton);
  article.append(controls, outcome);
  return article;
}

/** Runs an action of a card once, saying how it went under the card. */
async function act(button, outcome, action) {
  button.disabled = true;
  try {
    const [ok, text, status] = await action();
    say(outcome, text, ok, status);
    button.disabled = ok;
  } catch (error) {
    say(outcome, `not done: ${error.message}`, false);
    button.disabled = false;
  }
}

async function approve(p, validity) {
  const data = state.data;
  const file = p.proposal;
  if (!state.key) {
    return [false, "give the page your approver key first"];
  }
  const approver = data.approvers.find((a) => a.public_key === state.publicKey);
  if (!approver) {
    return [false, "this key is none of this gateway's approvers ([approvals] approvers)"];
  }
  if (file.audience && file.audience !== data.audience) {
    return [false, "the proposal is for another gateway; nothing signed"];
  }
  const now = Math.floor(Date.now() / 1000);
  if (p.expires_at <= now) {
    return [false, "the proposal stopped waiting; nothing signed"];
  }
  // What is shown is what is signed: the arguments' digest is recomputed here.
  if ((await sha256(canonical(file.args))) !== file.args_digest) {
    return [false, "these arguments do not match the proposal's digest; sign it with `capability approve`"];
  }
  const id = hex(crypto.getRandomValues(new Uint8Array(16)));
  const approval = {
    id,
    tool: file.tool,
    tool_type: file.tool_type,
    audience: data.audience,
    descriptor_hash: file.descriptor_hash,
    args_digest: file.args_digest,
    proposer: file.proposer,
    approver: approver.name,
    issued_at: now,
    expires_at: now + validity,
  };
  const signed = new TextEncoder().encode("capability approval v3\n" + canonical(approval));
  const signature = await crypto.subtle.sign({ name: "Ed25519" }, state.key, signed);
  approval.signature = hex(new Uint8Array(signature));
  const { status, data: answer } = await api("approve", { proposal: p.id, approval });
  if (status !== 201) {
    return [false, `${status}: ${shown(answer && answer.error)}`, status];
  }
  return [
    true,
    `approved by ${shown(approver.name)}: approval ${shown(answer.approval)}, valid until ` +
      `${localTime(answer.expires_at)}; the agent's retry of the call runs it`,
    status,
  ];
}

async function reject(p, reason) {
  const { status, data } = await api("reject", { proposal: p.id, reason });
  if (status !== 200) {
    return [false, `${status}: ${shown(data && data.error)}`, status];
  }
  return [true, "rejected: the agent's retry of the call is told so", status];
}

/** The approver's key (64 hex digits, as `capability keygen` writes it), as a key that signs. */
async function useKey(text) {
  const digits = text.trim();
  if (!/^[0-9a-fA-F]{64}$/.test(digits)) {
    throw new Error("expected 64 hex digits (an Ed25519 key, as `capability keygen` writes it)");
  }
  const seed = Uint8Array.from(digits.match(/../g), (b) => parseInt(b, 16));
  // PKCS #8 of an Ed25519 seed (RFC 8410): WebCrypto takes no raw private key.
  const prefix = [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];
  const pkcs8 = new Uint8Array([...prefix, ...seed]);
  seed.fill(0);
  const loose = await crypto.subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, true, ["sign"]);
  pkcs8.fill(0);
  const jwk = await crypto.subtle.exportKey("jwk", loose);
  state.publicKey = hex(fromBase64Url(jwk.x));
  // Kept only as a key that cannot be exported again.
  state.key = await crypto.subtle.importKey("jwk", jwk, { name: "Ed25519" }, false, ["sign"]);
  nameKey();
}

/** Says whose key the page holds, once it knows the approvers. */
function nameKey() {
  if (!state.key) {
    return;
  }
  const approvers = state.data ? state.data.approvers : [];
  const approver = approvers.find((a) => a.public_key === state.publicKey);
  if (approver) {
    say($("key-status"), `signing as ${shown(approver.name)}`, true);
  } else if (state.data) {
    say($("key-status"), "this key is none of this gateway's approvers", false);
  } else {
    say($("key-status"), "key ready; show the proposals to see whose it is", true);
  }
}

async function keyFrom(text) {
  try {
    await useKey(text);
  } catch (error) {
    state.key = null;
    say($("key-status"), `not used: ${error.message}`, false);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  if (!window.isSecureContext || !crypto.subtle) {
    say(
      $("status"),
      "this page signs with WebCrypto, which a browser gives only to HTTPS or loopback pages: " +
        "open it over HTTPS (a TLS proxy in front of the gateway) or on a loopback address",
      false,
    );
  }
  $("load").addEventListener("click", load);
  $("token").addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      load();
    }
  });
  $("use-key").addEventListener("click", async () => {
    const input = $("key-text");
    const text = input.value;
    input.value = "";
    await keyFrom(text);
  });
  $("key-file").addEventListener("change", async () => {
    const input = $("key-file");
    const chosen = input.files && input.files[0];
    if (chosen) {
      await keyFrom(await chosen.text());
    }
    input.value = "";
  });
});
