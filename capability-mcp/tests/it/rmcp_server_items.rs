//! `GovernedServer` beyond tools: resources, templates, subscriptions, prompts, completion,
//! skills and directories decided by the caller's role and recorded; tasks served only to the
//! session that made them; a caller without a role gets nothing of any method; the client's
//! lifecycle notifications are passed on, anything else it sends is not. The inner
//! handler journals every request that reaches it, so a refusal is seen not to.

use std::sync::{Arc, Mutex};

use capability::audit::{AuditedDispatch, Budget, MemorySink, Phase, Verdict};
use capability::rmcp::{GovernedServer, RoleResolver};
use capability::{Policy, Server};
use rmcp::model::ProtocolVersion;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    ClientNotification, ClientRequest, CompleteRequestParams, CompleteResult, CreateTaskResult,
    CustomNotification, CustomRequest, CustomResult, GetPromptRequestParams, GetPromptResponse,
    GetSkillRequestParams, GetSkillResult, GetTaskParams, GetTaskResult, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, Task, TaskStatus, UnsubscribeRequestParams,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RunningService,
};
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceError, ServiceExt};
use serde_json::{Value, json};

const POLICY: &str = r#"
[roles.reader]
ceiling = "unrestricted"
allow = ["docs/*"]
resources = ["docs/file:///srv/docs/*", "docs/skill://docs/*"]
prompts = ["docs/summarize"]
"#;

/// The inner server: a few of everything, and a journal of what reached it.
#[derive(Clone, Default)]
struct Docs {
    journal: Arc<Mutex<Vec<String>>>,
}

impl Docs {
    fn note(&self, what: impl Into<String>) {
        self.journal.lock().expect("journal").push(what.into());
    }

    fn journal(&self) -> Vec<String> {
        self.journal.lock().expect("journal").clone()
    }
}

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid result")
}

const SKILL: &str = "skill://docs/deploy/SKILL.md";
const SECRET_SKILL: &str = "skill://secret/keys/SKILL.md";

impl ServerHandler for Docs {
    // Logging is deprecated by SEP-2577 but still served, and still governed.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_prompts()
                .enable_completions()
                .enable_logging()
                .enable_tasks()
                .enable_skills_with_directory_read()
                .build(),
        )
        .with_server_info(Implementation::new("docs", "1.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(from(
            json!({"tools": [{"name": "long_job", "inputSchema": {"type": "object"}}]}),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.note(format!("call {}", request.name));
        let task = Task::new(
            "t-1",
            TaskStatus::Working,
            "2026-12-01T00:00:00Z",
            "2026-12-01T00:00:00Z",
        );
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.note(format!("get_task {}", request.task_id));
        Ok(from(json!({
            "resultType": "complete", "taskId": request.task_id, "status": "working",
            "createdAt": "2026-12-01T00:00:00Z", "lastUpdatedAt": "2026-12-01T00:00:00Z",
            "ttlMs": null
        })))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.note(format!("cancel_task {}", request.task_id));
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(from(json!({"resources": [
            {"uri": "file:///srv/docs/a.md", "name": "a"},
            {"uri": "file:///etc/passwd", "name": "passwd"},
        ]})))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(from(json!({"resourceTemplates": [
            {"uriTemplate": "file:///srv/docs/{name}", "name": "doc"},
            {"uriTemplate": "file:///etc/{name}", "name": "config"},
        ]})))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.note(format!("read {}", request.uri));
        let result: rmcp::model::ReadResourceResult =
            from(json!({"contents": [{"uri": request.uri, "text": "contents"}]}));
        Ok(result.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.note(format!("subscribe {}", request.uri));
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.note(format!("unsubscribe {}", request.uri));
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(from(
            json!({"prompts": [{"name": "summarize"}, {"name": "exfiltrate"}]}),
        ))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.note(format!("prompt {}", request.name));
        let result: rmcp::model::GetPromptResult = from(json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "summarize"}}
        ]}));
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.note(format!("complete {}", request.argument.name));
        Ok(from(
            json!({"completion": {"values": ["a.md"], "hasMore": false}}),
        ))
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let skill = |uri: &str, name: &str| {
            json!({"uri": uri, "frontmatter": {"name": name, "description": "A skill."},
                   "resources": "dynamic"})
        };
        Ok(from(
            json!({"skills": [skill(SKILL, "deploy"), skill(SECRET_SKILL, "keys")]}),
        ))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        self.note(format!("skill {}", request.uri));
        Ok(from(json!({
            "skill": {"uri": request.uri, "frontmatter": {"name": "deploy", "description": "A skill."},
                      "resources": "dynamic"},
            "content": "# Deploy"
        })))
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        self.note(format!("directory {}", request.uri));
        Ok(from(json!({"resources": [
            {"uri": "file:///srv/docs/a.md", "name": "a"},
            {"uri": "file:///srv/private/key", "name": "key"},
        ]})))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Everything asked for, resource subscriptions included.
        Some(requested.clone())
    }

    async fn on_progress(
        &self,
        notification: ProgressNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.note(format!("progress {}", notification.progress));
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        self.note("roots changed");
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        self.note(format!("custom request {}", request.method));
        Ok(CustomResult::new(json!({"dumped": true})))
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleServer>,
    ) {
        self.note(format!("custom {}", notification.method));
    }
}

/// The role `reader` for every client, and a session of its own per client name (a stdio
/// server names none).
struct Reader(Option<&'static str>);

impl RoleResolver for Reader {
    fn role(&self, _context: &RequestContext<RoleServer>) -> Option<String> {
        self.0.map(str::to_owned)
    }

    fn session(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        context
            .peer
            .peer_info()
            .map(|info| info.client_info.name.clone())
    }
}

struct Harness {
    docs: Docs,
    sink: Arc<MemorySink>,
    dispatch: Arc<AuditedDispatch>,
    policy: Arc<Policy>,
}

impl Harness {
    fn new() -> Self {
        let sink = Arc::new(MemorySink::new());
        let dispatch = AuditedDispatch::new(sink.clone()).with_budget(Budget {
            max_calls: 1000,
            max_denials: 1000,
        });
        Harness {
            docs: Docs::default(),
            sink,
            dispatch: Arc::new(dispatch),
            policy: Arc::new(Policy::from_toml_str(POLICY).expect("valid policy")),
        }
    }

    async fn client(
        &self,
        role: Option<&'static str>,
        name: &str,
    ) -> RunningService<RoleClient, ClientConfig> {
        self.client_of(role, name, ClientLifecycleMode::Initialize)
            .await
    }

    /// A client of protocol 2026-07-28 (`server/discover`, `subscriptions/listen`).
    async fn modern_client(
        &self,
        role: Option<&'static str>,
        name: &str,
    ) -> RunningService<RoleClient, ClientConfig> {
        let modern = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        self.client_of(role, name, modern).await
    }

    async fn client_of(
        &self,
        role: Option<&'static str>,
        name: &str,
        lifecycle: ClientLifecycleMode,
    ) -> RunningService<RoleClient, ClientConfig> {
        let governed = GovernedServer::new(
            self.docs.clone(),
            Server::trusted("docs"),
            self.policy.clone(),
            Reader(role),
            self.dispatch.clone(),
        );
        let (server_side, client_side) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            if let Ok(running) = governed.serve(server_side).await {
                let _ = running.waiting().await;
            }
        });
        ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new(name, "1.0.0"),
        )
        .serve_with_lifecycle(client_side, lifecycle)
        .await
        .expect("connects")
    }

    /// `(method, target, verdict)` of each record but intents.
    fn trail(&self) -> Vec<(String, String, Verdict)> {
        self.sink
            .records()
            .into_iter()
            .filter(|r| r.phase != Some(Phase::Intent))
            .map(|r| (r.method.unwrap_or_default(), r.tool, r.verdict))
            .collect()
    }
}

fn refused<T: std::fmt::Debug>(result: Result<T, ServiceError>) -> ErrorData {
    match result {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("not refused: {other:?}"),
    }
}

fn reason(error: &ErrorData) -> String {
    error.data.as_ref().expect("data")["reasons"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn triple(method: &str, target: &str, verdict: Verdict) -> (String, String, Verdict) {
    (method.to_owned(), target.to_owned(), verdict)
}

#[tokio::test]
async fn subscribe_and_completion_are_decided_and_recorded() {
    let h = Harness::new();
    let reader = h.client(Some("reader"), "alice").await;
    let peer = reader.peer();
    let resources = peer.list_resources(None).await.expect("lists");
    let uris: Vec<&str> = resources.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["file:///srv/docs/a.md"]);
    assert_eq!(
        resources.cache_scope,
        Some(rmcp::model::CacheScope::Private)
    );
    let templates = peer.list_resource_templates(None).await.expect("lists");
    let names: Vec<&str> = templates
        .resource_templates
        .iter()
        .map(|t| t.uri_template.as_str())
        .collect();
    assert_eq!(names, ["file:///srv/docs/{name}"]);
    let prompts = peer.list_prompts(None).await.expect("lists");
    let names: Vec<&str> = prompts.prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["summarize"]);

    #[allow(deprecated)]
    {
        peer.subscribe(SubscribeRequestParams::new("file:///srv/docs/a.md"))
            .await
            .expect("subscribes to what it may read");
        let error = refused(
            peer.subscribe(SubscribeRequestParams::new("file:///etc/passwd"))
                .await,
        );
        assert_eq!(reason(&error), "not_allowed");
        peer.unsubscribe(UnsubscribeRequestParams::new("file:///srv/docs/a.md"))
            .await
            .expect("unsubscribes");
    }
    let complete = |reference: Value| -> CompleteRequestParams {
        from(json!({"ref": reference, "argument": {"name": "name", "value": "a"}}))
    };
    peer.complete(complete(
        json!({"type": "ref/resource", "uri": "file:///srv/docs/{name}"}),
    ))
    .await
    .expect("completes a template it may read");
    peer.complete(complete(json!({"type": "ref/prompt", "name": "summarize"})))
        .await
        .expect("completes a prompt it may get");
    let error = refused(
        peer.complete(complete(
            json!({"type": "ref/resource", "uri": "file:///etc/{name}"}),
        ))
        .await,
    );
    assert_eq!(reason(&error), "not_allowed");
    let error = refused(
        peer.complete(complete(
            json!({"type": "ref/prompt", "name": "exfiltrate"}),
        ))
        .await,
    );
    assert_eq!(error.data.as_ref().expect("data")["ref"], "exfiltrate");
    let _ = reader.cancel().await;

    assert_eq!(
        h.docs.journal(),
        [
            "subscribe file:///srv/docs/a.md",
            "unsubscribe file:///srv/docs/a.md",
            "complete name",
            "complete name"
        ],
        "only what was allowed reached the handler"
    );
    assert_eq!(
        h.trail(),
        [
            triple(
                "resources/subscribe",
                "file:///srv/docs/a.md",
                Verdict::Allowed
            ),
            triple("resources/subscribe", "file:///etc/passwd", Verdict::Denied),
            triple(
                "resources/unsubscribe",
                "file:///srv/docs/a.md",
                Verdict::Allowed
            ),
            triple(
                "completion/complete",
                "file:///srv/docs/{name}",
                Verdict::Allowed
            ),
            triple("completion/complete", "summarize", Verdict::Allowed),
            triple("completion/complete", "file:///etc/{name}", Verdict::Denied),
            triple("completion/complete", "exfiltrate", Verdict::Denied),
        ]
    );
}

#[tokio::test]
async fn skills_and_directories_are_decided_by_uri() {
    let h = Harness::new();
    let reader = h.client(Some("reader"), "alice").await;
    let peer = reader.peer();
    let skills = peer.list_skills(None).await.expect("lists");
    let uris: Vec<&str> = skills.skills.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(uris, [SKILL]);
    peer.get_skill(GetSkillRequestParams::new(SKILL))
        .await
        .expect("gets the skill it may read");
    let error = refused(
        peer.get_skill(GetSkillRequestParams::new(SECRET_SKILL))
            .await,
    );
    assert_eq!(reason(&error), "not_allowed");
    let listing = peer
        .read_resource_directory(ReadResourceDirectoryRequestParams::new("file:///srv/docs/"))
        .await
        .expect("reads a directory it may read");
    let uris: Vec<&str> = listing.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        ["file:///srv/docs/a.md"],
        "entries it may not read are left out"
    );
    let error = refused(
        peer.read_resource_directory(ReadResourceDirectoryRequestParams::new("file:///srv/"))
            .await,
    );
    assert_eq!(reason(&error), "not_allowed");
    let _ = reader.cancel().await;
    assert_eq!(
        h.docs.journal(),
        [
            format!("skill {SKILL}"),
            "directory file:///srv/docs/".to_owned()
        ]
    );
    assert_eq!(
        h.trail(),
        [
            triple("skills/get", SKILL, Verdict::Allowed),
            triple("skills/get", SECRET_SKILL, Verdict::Denied),
            triple(
                "resources/directory/read",
                "file:///srv/docs/",
                Verdict::Allowed
            ),
            triple("resources/directory/read", "file:///srv/", Verdict::Denied),
        ]
    );
}

#[tokio::test]
async fn a_task_is_only_its_sessions() {
    let h = Harness::new();
    let alice = h.client(Some("reader"), "alice").await;
    let mallory = h.client(Some("reader"), "mallory").await;
    let created = alice
        .peer()
        .call_tool(CallToolRequestParams::new("long_job"))
        .await;
    // rmcp's client turns a task into its own type; the journal shows the call ran.
    let _ = created;
    assert_eq!(h.docs.journal(), ["call long_job"]);
    let error = refused(mallory.peer().get_task(GetTaskParams::new("t-1")).await);
    assert_eq!(error.data.as_ref().expect("data")["task"], "t-1");
    let error = refused(
        mallory
            .peer()
            .cancel_task(CancelTaskParams::new("t-1"))
            .await,
    );
    assert!(
        error.message.contains("task `t-1` refused"),
        "{}",
        error.message
    );
    alice
        .peer()
        .get_task(GetTaskParams::new("t-1"))
        .await
        .expect("the session that made it gets it");
    let _ = alice.cancel().await;
    let _ = mallory.cancel().await;
    assert_eq!(h.docs.journal(), ["call long_job", "get_task t-1"]);
    let refusals: Vec<(String, String)> = h
        .sink
        .records()
        .into_iter()
        .filter(|r| r.verdict == Verdict::Denied)
        .map(|r| (r.method.unwrap_or_default(), r.session))
        .collect();
    assert_eq!(
        refusals,
        [
            ("tasks/get".to_owned(), "mcp:docs/reader/mallory".to_owned()),
            (
                "tasks/cancel".to_owned(),
                "mcp:docs/reader/mallory".to_owned()
            )
        ]
    );
}

#[tokio::test]
async fn a_caller_without_a_role_gets_nothing_of_any_method() {
    let h = Harness::new();
    let anonymous = h.client(None, "anonymous").await;
    let peer = anonymous.peer();
    assert!(peer.list_tools(None).await.expect("lists").tools.is_empty());
    assert!(
        peer.list_resources(None)
            .await
            .expect("lists")
            .resources
            .is_empty()
    );
    assert!(
        peer.list_resource_templates(None)
            .await
            .expect("lists")
            .resource_templates
            .is_empty()
    );
    assert!(
        peer.list_prompts(None)
            .await
            .expect("lists")
            .prompts
            .is_empty()
    );
    assert!(
        peer.list_skills(None)
            .await
            .expect("lists")
            .skills
            .is_empty()
    );
    let no_role = |error: ErrorData| assert_eq!(reason(&error), "no_role", "{error:?}");
    no_role(refused(
        peer.read_resource(ReadResourceRequestParams::new("file:///srv/docs/a.md"))
            .await,
    ));
    no_role(refused(
        peer.get_prompt(GetPromptRequestParams::new("summarize"))
            .await,
    ));
    no_role(refused(
        peer.get_skill(GetSkillRequestParams::new(SKILL)).await,
    ));
    #[allow(deprecated)]
    no_role(refused(
        peer.subscribe(SubscribeRequestParams::new("file:///srv/docs/a.md"))
            .await,
    ));
    no_role(refused(
        peer.call_tool(CallToolRequestParams::new("long_job")).await,
    ));
    no_role(refused(peer.get_task(GetTaskParams::new("t-1")).await));
    #[allow(deprecated)]
    no_role(refused(
        peer.set_level(from(json!({"level": "debug"}))).await,
    ));
    let _ = anonymous.cancel().await;
    assert!(h.docs.journal().is_empty(), "nothing reached the handler");
    let records = h.sink.records();
    assert_eq!(records.len(), 7, "every attempt is on record");
    assert!(
        records
            .iter()
            .all(|r| r.verdict == Verdict::Denied && r.role == "(none)")
    );
    assert!(records.iter().all(|r| r.reasons[0].code() == "no_role"));
}

#[tokio::test]
async fn lifecycle_notifications_are_passed_on_and_no_custom_message() {
    let h = Harness::new();
    let client = h.client(Some("reader"), "alice").await;
    let peer = client.peer();
    peer.notify_progress(from(json!({"progressToken": "p-1", "progress": 1.0})))
        .await
        .expect("sent");
    peer.notify_roots_list_changed().await.expect("sent");
    peer.send_notification(ClientNotification::CustomNotification(
        CustomNotification::new(
            "x-vendor/exfiltrate",
            Some(json!({"uri": "file:///etc/passwd"})),
        ),
    ))
    .await
    .expect("sent");
    // A vendor's request is not passed on either. Its answer also says the server has read
    // the notifications before it.
    let error = refused(
        peer.send_request(ClientRequest::CustomRequest(CustomRequest::new(
            "x-vendor/dump",
            Some(json!({"all": true})),
        )))
        .await,
    );
    assert_eq!(
        error.code,
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        "{error:?}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while h.docs.journal().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            h.docs.journal()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let _ = client.cancel().await;
    let mut journal = h.docs.journal();
    journal.sort();
    assert_eq!(
        journal,
        ["progress 1", "roots changed"],
        "the custom messages are not"
    );
}

#[tokio::test]
async fn a_listen_filter_keeps_list_changes_and_drops_resource_subscriptions() {
    let h = Harness::new();
    let reader = h.modern_client(Some("reader"), "alice").await;
    let mut filter = SubscriptionFilter::builder().tools_list_changed().build();
    // A subscription through `listen` would be one the role's resources never decided.
    filter.resource_subscriptions = Some(vec!["file:///etc/passwd".to_owned()]);
    let subscription = reader.peer().listen(filter).await.expect("listens");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
    assert_eq!(
        subscription.acknowledged().resource_subscriptions,
        None,
        "resource subscriptions go through resources/subscribe, which is decided"
    );
    drop(subscription);
    let _ = reader.cancel().await;

    let anonymous = h.modern_client(None, "anonymous").await;
    // Lifecycle methods are answered for anyone.
    anonymous
        .peer()
        .send_request(rmcp::model::ClientRequest::PingRequest(Default::default()))
        .await
        .expect("ping is answered");
    let mut subscription = anonymous
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("acknowledged before the handler runs");
    let end = subscription.next().await;
    assert!(
        matches!(&end, Err(ServiceError::McpError(error)) if reason(error) == "no_role")
            || matches!(&end, Ok(None)),
        "a caller without a role is not kept listening: {end:?}"
    );
    let _ = anonymous.cancel().await;
}
