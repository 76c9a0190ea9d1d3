//! Recorded tool lists: the text of a `tools/list` result, a JSON-RPC response holding one, or a
//! bare array of MCP tools.

use serde_json::Value;

/// The tools of a `tools/list` result, a JSON-RPC response holding one, or a bare array; and
/// the server's name when the text records it (`{"server": {"name": ..}}`).
pub fn parse_tools(text: &str, origin: &str) -> Result<(Option<String>, Vec<Value>), String> {
    // A key written twice (`"readOnlyHint": false, "readOnlyHint": true`) would be read as its
    // last value here and as its first by another reader: refused, naming the key.
    capability::json::no_duplicate_keys(text).map_err(|e| {
        if e.to_string().starts_with(capability::json::DUPLICATE_KEY) {
            format!("{origin} is refused: {e} (two readers of it could read two different values)")
        } else {
            format!("{origin} is not JSON: {e}")
        }
    })?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("{origin} is not JSON: {e}"))?;
    let server_name = value
        .get("server")
        .and_then(|s| s.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let list = match &value {
        Value::Array(_) => &value,
        Value::Object(object) => match (object.get("tools"), object.get("result")) {
            (Some(tools), _) => tools,
            (None, Some(result)) => result.get("tools").unwrap_or(&Value::Null),
            (None, None) => &Value::Null,
        },
        _ => &Value::Null,
    };
    match list {
        Value::Array(tools) => Ok((server_name, tools.clone())),
        _ => Err(format!(
            "{origin}: expected an MCP tools/list result ({{\"tools\": [...]}}) or an array of tools"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_lists_in_every_shape() {
        let tools = r#"[{"name": "a", "inputSchema": {"type": "object"}}]"#;
        assert_eq!(parse_tools(tools, "x").map(|(_, t)| t.len()).ok(), Some(1));
        let result = format!(r#"{{"tools": {tools}, "server": {{"name": "s"}}}}"#);
        assert_eq!(
            parse_tools(&result, "x").map(|(n, t)| (n, t.len())).ok(),
            Some((Some("s".to_owned()), 1))
        );
        let rpc = format!(r#"{{"jsonrpc": "2.0", "id": 1, "result": {{"tools": {tools}}}}}"#);
        assert_eq!(parse_tools(&rpc, "x").map(|(_, t)| t.len()).ok(), Some(1));
        let bad = parse_tools(r#"{"nope": 1}"#, "`f.json`").err();
        assert!(bad.is_some_and(|m| m.contains("expected an MCP tools/list result")));
        let bad = parse_tools("{", "`f.json`").err();
        assert!(bad.is_some_and(|m| m.starts_with("`f.json` is not JSON")));
    }
}
