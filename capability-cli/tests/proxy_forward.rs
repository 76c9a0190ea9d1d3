//! Resources and prompts behind `capability proxy`: neither advertised nor forwarded unless the
//! policy's `[servers.<name>] forward = [..]` names them (the default is tools only).

mod proxy_common;
mod support;

use proxy_common::{Proxied, proxy_args, scratch};
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};

const ROLE: &str = "[roles.operator]\nceiling = \"unrestricted\"\nallow = [\"everything/*\"]\n";

#[tokio::test(flavor = "current_thread")]
async fn resources_and_prompts_pass_only_where_the_policy_says() {
    let servers = require_servers!("resources_and_prompts_pass_only_where_the_policy_says");
    for (case, forward) in [
        ("tools-only", ""),
        (
            "forwarded",
            "[servers.everything]\nforward = [\"resources\", \"prompts\"]\n",
        ),
    ] {
        let dir = scratch(&format!("forward-{case}"), &format!("{ROLE}{forward}"));
        let audit = dir.join("audit.jsonl");
        let args = proxy_args(
            &dir,
            "operator",
            "everything",
            &audit,
            &["--trust", "trusted"],
            &servers.everything(),
        );
        let proxied = Proxied::start(&args).await;
        let peer = proxied.client.peer().clone();
        let capabilities = peer.peer_info().expect("server info").capabilities.clone();
        let resources = peer.list_resources(None).await;
        let prompts = peer.list_prompts(None).await;
        if forward.is_empty() {
            assert!(capabilities.resources.is_none(), "{case}: advertised");
            assert!(capabilities.prompts.is_none(), "{case}: advertised");
            assert!(
                resources.as_ref().is_ok_and(|r| r.resources.is_empty()),
                "{case}: {resources:?}"
            );
            assert!(
                prompts.as_ref().is_ok_and(|p| p.prompts.is_empty()),
                "{case}: {prompts:?}"
            );
            let read = peer
                .read_resource(ReadResourceRequestParams::new(
                    "demo://resource/static/document/architecture.md",
                ))
                .await;
            assert!(read.is_err(), "{case}: a resource was read: {read:?}");
            let got = peer
                .get_prompt(GetPromptRequestParams::new("simple-prompt"))
                .await;
            assert!(got.is_err(), "{case}: a prompt was got: {got:?}");
        } else {
            assert!(capabilities.resources.is_some(), "{case}: not advertised");
            assert!(capabilities.prompts.is_some(), "{case}: not advertised");
            let resources = resources.expect("lists the server's resources");
            let first = resources
                .resources
                .first()
                .expect("server-everything has resources");
            let read = peer
                .read_resource(ReadResourceRequestParams::new(first.uri.clone()))
                .await
                .expect("reads a resource through the proxy");
            assert!(!read.contents.is_empty(), "{case}: {read:?}");
            let prompts = prompts.expect("lists the server's prompts");
            let prompt = prompts
                .prompts
                .first()
                .expect("server-everything has prompts");
            assert!(!prompt.name.is_empty());
        }
        // Tools are governed either way.
        assert!(!proxied.names().await.is_empty(), "{case}");
        let status = proxied.close().await;
        assert!(status.success(), "{case}: {status}");
    }
}
