//! `ByTable` is the door: a server that would answer anything (a vendor's request, a
//! notification rmcp has no type for, even a method the table refuses) answers, behind the
//! table, only the methods the table lets through. Served without it, the same server answers
//! them: the table, not the handler, is what refuses.

#![cfg(feature = "rmcp-server")]

use std::sync::{Arc, Mutex};

use capability_mcp::rmcp::ByTable;
use rmcp::model::{
    ClientNotification, ClientRequest, CustomNotification, CustomRequest, CustomResult,
    ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceError, ServiceExt};
use serde_json::json;

/// Answers every custom request, and notes every custom notification it hears.
#[derive(Clone, Default)]
struct Anything {
    heard: Arc<Mutex<Vec<String>>>,
}

impl ServerHandler for Anything {
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Ok(CustomResult::new(json!({ "answered": request.method })))
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Ok(mut heard) = self.heard.lock() {
            heard.push(notification.method);
        }
    }
}

/// `tasks/list` (a row the table refuses) and a vendor's method, asked of `server`; what the
/// server heard of a vendor's notification.
async fn ask<S: ServerHandler>(server: S, heard: &Arc<Mutex<Vec<String>>>) -> Vec<Result<(), i32>> {
    let (server_side, client_side) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_side).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(client_side).await.expect("MCP handshake");
    let mut answers = Vec::new();
    for method in ["tasks/list", "vendor/anything"] {
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(json!({}))));
        answers.push(match client.peer().send_request(request).await {
            Ok(ServerResult::CustomResult(_)) => Ok(()),
            Ok(other) => panic!("{method}: {other:?}"),
            Err(ServiceError::McpError(error)) => Err(error.code.0),
            Err(other) => panic!("{method}: {other}"),
        });
    }
    let note = ClientNotification::CustomNotification(CustomNotification::new(
        "vendor/note",
        Some(json!({})),
    ));
    client.peer().send_notification(note).await.expect("sent");
    // A request after it: the notification has been handled once this is answered.
    let _ = client.peer().list_all_tools().await;
    let _ = client.cancel().await;
    assert!(heard.lock().is_ok());
    answers
}

#[tokio::test(flavor = "current_thread")]
async fn behind_the_table_only_its_methods_reach_the_server() {
    let direct = Anything::default();
    let heard = direct.heard.clone();
    assert_eq!(
        ask(direct, &heard).await,
        [Ok(()), Ok(())],
        "served without the table"
    );
    assert_eq!(
        heard.lock().map(|h| h.clone()).unwrap_or_default(),
        ["vendor/note"]
    );

    let behind = Anything::default();
    let heard = behind.heard.clone();
    assert_eq!(
        ask(ByTable::new(behind), &heard).await,
        [Err(-32601), Err(-32601)],
        "behind the table: method not found"
    );
    assert!(
        heard.lock().map(|h| h.is_empty()).unwrap_or(false),
        "dropped"
    );
}
