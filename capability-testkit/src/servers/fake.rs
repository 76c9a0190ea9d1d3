//! A tiny MCP server written in `sh`, for tests that need a live server with a tool list of
//! their choosing and a self-declared name of their choosing (no Node.js needed).

use std::path::Path;

/// `sh -c <script>`: a server of the `initialize` generation (it rejects `server/discover`) that
/// calls itself `declared_name`, lists the `tools/list` result held in `tools_file` (one line of
/// JSON, e.g. `{"tools": [...]}`) on every `tools/list`, and answers every `tools/call` with the
/// text `called`. Returns the program and its arguments.
///
/// Panics when `declared_name` or the path holds a `'` (the script quotes them that way).
pub fn fake_server(declared_name: &str, tools_file: &Path) -> (String, Vec<String>) {
    let script = fake_server_script(declared_name, tools_file);
    ("sh".to_owned(), vec!["-c".to_owned(), script])
}

/// The `sh` script of [`fake_server`], to write to a file and run as `sh <file>`.
pub fn fake_server_script(declared_name: &str, tools_file: &Path) -> String {
    let file = tools_file.display().to_string();
    assert!(
        !declared_name.contains('\'') && !file.contains('\''),
        "no quotes in a fake server's name or file"
    );
    format!(
        r#"reply() {{ printf '{{"jsonrpc":"2.0","id":%s,%s}}\n' "$1" "$2"; }}
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^[^{{]*{{[^{{]*"id":\([0-9][0-9]*\|"[^"]*"\).*/\1/p')
  case "$line" in
    *'"method":"server/discover"'*) reply "$id" '"error":{{"code":-32601,"message":"Method not found"}}' ;;
    *'"method":"initialize"'*) reply "$id" '"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"{declared_name}","version":"1.0.0"}}}}' ;;
    *'"method":"tools/list"'*) reply "$id" "\"result\":$(cat '{file}')" ;;
    *'"method":"tools/call"'*) reply "$id" '"result":{{"content":[{{"type":"text","text":"called"}}]}}' ;;
  esac
done"#
    )
}
