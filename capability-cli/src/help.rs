//! The long help texts of the command line.

/// The long help of `capability proxy`.
pub(crate) const PROXY_ABOUT: &str =
    "Govern an MCP server for any MCP client: speak MCP to the client on \
standard input and output, spawn the server over stdio, and put the policy, the lockfile and the \
audit trail between them.

With --listen, the proxy serves Streamable HTTP instead (at http://<address>/mcp), to any number \
of clients, as an OAuth 2.1 resource server: each request's role comes from its `Authorization: \
Bearer` token, an access token of the policy's [auth] issuer for its audience (roles from its \
scopes through [auth.scope_roles]), or a token looked up by its SHA-256 in the policy's \
[bearer_tokens] table (`\"sha256:<hex>\" = \"<role>\"`); --role is then refused. A request \
without a valid token gets 401 with the protected resource metadata's URL, and nothing of it \
runs. One server is shared by every client, and each is told when its tools change. There is no \
TLS: an address that is not loopback is served with a warning. With --upstream <url>, the server \
is a Streamable HTTP endpoint instead of a command, reached with the proxy's own token \
(--upstream-token-file), never a client's; with --upstream-exchange-client, each caller's calls \
carry a token the issuer gave in exchange for the caller's (RFC 8693). Once a call cannot reach \
the server, that call gets an error saying so and the proxy exits 1, as when a spawned server \
exits (let a supervisor restart it).

The client sees only the tools its role may call (an untrusted server's annotations are not \
believed; with --lock, a tool that drifted from its pin is hidden; duplicate names are hidden). \
A call of any other tool is answered with a JSON-RPC error carrying the reasons and never reaches \
the server. Every call is on record before it is forwarded (its intent) and after (its outcome); \
a refused call is one record. When the trail stops taking writes, a call whose intent cannot be \
written is refused and never forwarded, and nothing is forwarded until the records kept in \
memory are written; listing goes on. A JSON Lines trail is locked while the proxy runs, and one \
removed or replaced under the proxy refuses the next call before it runs. With --checkpoint-key, \
the trail's checkpoints are signed, so `capability audit verify --key` finds a cut-off tail. When \
the server announces that its tools changed, the proxy lists them again (announcements are \
coalesced), reviews them against the lockfile (drift is reported on standard error) and tells \
the client once per change.

Tools only by default: resources, prompts and completions are neither advertised nor forwarded. \
The policy's entry for the server can let resources and prompts through (`[servers.<name>] \
forward = [\"resources\", \"prompts\"]`); every list is then filtered by the role's `resources` \
and `prompts` patterns, and every read, subscription, get and completion is decided and recorded. \
The server's requests to the client (sampling, elicitation, roots) are refused unless the role's \
`server_requests` names them, and always over --listen.

Over stdio, standard output is the client's JSON-RPC channel; the proxy's messages, and the \
server's standard error, go to standard error.";

/// What `capability proxy --help` prints after the options.
pub(crate) const PROXY_AFTER_HELP: &str = "Example (the `mcpServers` entry of a client):
  \"command\": \"capability\",
  \"args\": [\"proxy\", \"--policy\", \"/etc/capability/policy.toml\", \"--role\", \"viewer\",
           \"--server\", \"memory\", \"--audit\", \"/var/log/capability/memory.jsonl\",
           \"--\", \"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"]

Over Streamable HTTP, with the policy's [bearer_tokens]:
  capability proxy --policy policy.toml --server memory --audit memory.jsonl \\
    --listen 127.0.0.1:8931 -- npx -y @modelcontextprotocol/server-memory

Exit codes: 0 the client disconnected, or SIGTERM/SIGINT/SIGHUP (the server was stopped); 1 the \
server failed to connect, exited or closed its output (or a call could not reach --upstream); 2 bad input \
or usage (nothing is spawned, nothing listens), or a command that cannot be started.";
