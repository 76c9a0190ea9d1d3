//! An example fleet of ops tools and agents, and the registry a program builds from it.
//!
//! The tools are modelled on a real operations platform: Kubernetes, Prometheus, Grafana,
//! SigNoz, a SQL database, a runbook index, files, SSH, Slack and the audit log. Each tool is an
//! input type with `#[derive(Capability)]`; its `///` comment becomes the description and its
//! `#[capability(...)]` attribute says what it may do (read-only, destructive, idempotent, open
//! world) and which scopes a caller needs.
//!
//! Four agents bind them. `Operator` is an `#[agent]` and may bind anything, including
//! `restart_pod`, `delete_pod` and `ssh_exec`. `Monitor`, `Analyst` and `Auditor` are
//! `#[advisor_agent]`s: they may bind read-only tools only. Add `k8s::RestartPod` to one of their
//! `tools(...)` lists and this file no longer compiles; the error points at `RestartPod`.
//!
//! At startup, `main` collects every tool and agent with `Registry::from_inventory()` (which
//! checks the set again, for what the compiler cannot see) and prints it as two tables.
//!
//! ```text
//! cargo run --example fleet
//! ```

#![expect(
    dead_code,
    reason = "tool inputs are built from a model's tool call at run time; \
              this example only lists their manifests, so nothing constructs them"
)]

use std::process::ExitCode;

use capability::{AgentSpec, CapabilityManifest, Registry, advisor_agent, agent};

/// Kubernetes: pods, deployments and manifests.
mod k8s {
    use capability::Capability;

    /// One line of `list_pods` output.
    pub struct PodSummary {
        /// The pod name.
        pub name: String,
        /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
        pub phase: String,
        /// Container restarts, summed over the pod's containers.
        pub restarts: u32,
        /// The node the pod is scheduled on, if any.
        pub node: Option<String>,
    }

    /// List the pods of a namespace, with their phase and restart count.
    #[derive(Capability)]
    #[capability(read_only, idempotent, provider = "k8s", scopes = ["k8s:read"])]
    #[capability(title = "List pods", output = Vec<PodSummary>)]
    pub struct ListPods {
        /// The namespace; every namespace when empty.
        pub namespace: Option<String>,
        /// A label selector such as `app=checkout,tier=web`.
        pub label_selector: Option<String>,
    }

    /// List the cluster's namespaces.
    #[derive(Capability)]
    #[capability(read_only, idempotent, provider = "k8s", scopes = ["k8s:read"])]
    pub struct ListNamespaces;

    /// Fetch the recent logs of one container of a pod.
    ///
    /// Returns at most `tail_lines` lines, newest last.
    #[derive(Capability)]
    #[capability(read_only, provider = "k8s", scopes = ["k8s:read"], output = String)]
    pub struct GetPodLogs {
        /// The pod's namespace.
        pub namespace: String,
        /// The pod name.
        pub pod: String,
        /// The container; the pod's only container when omitted.
        pub container: Option<String>,
        /// How many lines to return, from the end.
        pub tail_lines: u32,
        /// Logs of the previous container instance, after a crash.
        pub previous: bool,
    }

    /// Describe a deployment: replicas, rollout status, conditions and recent events.
    #[derive(Capability)]
    #[capability(read_only, idempotent, provider = "k8s", scopes = ["k8s:read"])]
    pub struct DescribeDeployment {
        /// The deployment's namespace.
        pub namespace: String,
        /// The deployment name.
        pub name: String,
    }

    /// Restart a pod by deleting it and letting its controller recreate it.
    #[derive(Capability)]
    #[capability(destructive, provider = "k8s", scopes = ["k8s:write"])]
    pub struct RestartPod {
        /// The pod's namespace.
        pub namespace: String,
        /// The pod name.
        pub pod: String,
        /// Seconds the pod gets to shut down; the pod's own setting when omitted.
        pub grace_period_seconds: Option<u32>,
    }

    /// Set the replica count of a deployment.
    #[derive(Capability)]
    #[capability(destructive = false, idempotent, provider = "k8s", scopes = ["k8s:write"])]
    pub struct ScaleDeployment {
        /// The deployment's namespace.
        pub namespace: String,
        /// The deployment name.
        pub name: String,
        /// The desired number of replicas.
        pub replicas: u32,
    }

    /// Delete a pod. Pods without a controller are gone for good.
    #[derive(Capability)]
    #[capability(destructive, provider = "k8s", scopes = ["k8s:delete"])]
    pub struct DeletePod {
        /// The pod's namespace.
        pub namespace: String,
        /// The pod name.
        pub pod: String,
        /// Skip graceful termination.
        pub force: bool,
    }

    /// Apply a YAML manifest with server-side apply.
    ///
    /// Fields the manifest owns are overwritten, so a wrong manifest can undo live changes.
    #[derive(Capability)]
    #[capability(idempotent, provider = "k8s", scopes = ["k8s:write"])]
    pub struct ApplyManifest {
        /// One or more YAML documents.
        pub manifest: String,
        /// The field manager recorded on the objects.
        pub field_manager: String,
        /// Validate on the server without persisting anything.
        pub dry_run: bool,
    }
}

/// Prometheus: PromQL queries and alerts. The server is internal: a closed world.
mod prometheus {
    use capability::Capability;

    /// Run an instant PromQL query.
    #[derive(Capability)]
    #[capability(read_only, idempotent, open_world = false)]
    #[capability(provider = "prometheus", scopes = ["metrics:read"])]
    pub struct Query {
        /// The PromQL expression.
        pub promql: String,
        /// The evaluation time (RFC 3339 or Unix seconds); now when omitted.
        pub time: Option<String>,
    }

    /// Run a PromQL query over a time range, sampled every `step`.
    #[derive(Capability)]
    #[capability(read_only, idempotent, open_world = false)]
    #[capability(provider = "prometheus", scopes = ["metrics:read"], version = "2")]
    pub struct QueryRange {
        /// The PromQL expression.
        pub promql: String,
        /// The start of the range (RFC 3339 or Unix seconds).
        pub start: String,
        /// The end of the range (RFC 3339 or Unix seconds).
        pub end: String,
        /// The resolution, such as `30s` or `5m`.
        pub step: String,
    }

    /// List the alerts that are pending or firing.
    #[derive(Capability)]
    #[capability(read_only, idempotent, open_world = false)]
    #[capability(provider = "prometheus", scopes = ["metrics:read"])]
    pub struct ListAlerts {
        /// Only alerts with this `severity` label, such as `critical`.
        pub severity: Option<String>,
    }
}

/// Grafana: dashboards and annotations.
mod grafana {
    use capability::Capability;

    /// Fetch a dashboard's panels and their queries, by dashboard UID.
    #[derive(Capability)]
    #[capability(read_only, idempotent, provider = "grafana", scopes = ["grafana:read"])]
    pub struct GetDashboard(
        /// The dashboard UID, as in `/d/<uid>/...`.
        pub String,
    );

    /// Mark an event, such as a deploy or an incident, on dashboards.
    #[derive(Capability)]
    #[capability(destructive = false, provider = "grafana", scopes = ["grafana:write"])]
    pub struct CreateAnnotation {
        /// The dashboard to annotate; an organisation-wide annotation when omitted.
        pub dashboard_uid: Option<String>,
        /// The annotation text.
        pub text: String,
        /// Tags to filter annotations by.
        pub tags: Vec<String>,
        /// The event time in Unix milliseconds; now when omitted.
        pub time_ms: Option<i64>,
    }
}

/// SigNoz: distributed traces.
mod signoz {
    use capability::Capability;

    /// Search traces by service, operation and duration.
    #[derive(Capability)]
    #[capability(read_only, idempotent, provider = "signoz", scopes = ["traces:read"])]
    pub struct SearchTraces {
        /// The service name.
        pub service: String,
        /// The root operation, such as `POST /checkout`.
        pub operation: Option<String>,
        /// Only traces at least this long, in milliseconds.
        pub min_duration_ms: Option<u64>,
        /// How far back to look, in minutes.
        pub lookback_minutes: u32,
        /// The most traces to return.
        pub limit: u32,
    }

    /// Fetch every span of one trace.
    #[derive(Capability)]
    #[capability(read_only, idempotent, provider = "signoz", scopes = ["traces:read"])]
    pub struct GetTrace(
        /// The trace id, 32 hex digits.
        pub String,
    );
}

/// The operational database, through a read-only replica.
mod database {
    use capability::Capability;

    /// Run a single `SELECT` on the read replica, with a row limit and a timeout.
    #[derive(Capability)]
    #[capability(read_only, provider = "database", scopes = ["db:read"])]
    pub struct RunSelect {
        /// The database name.
        pub database: String,
        /// One `SELECT` statement.
        pub sql: String,
        /// The most rows to return.
        pub row_limit: u32,
        /// The statement timeout, in seconds.
        pub timeout_seconds: u32,
    }

    /// Show the query plan of a `SELECT` without running it.
    #[derive(Capability)]
    #[capability(read_only, idempotent, provider = "database", scopes = ["db:read"])]
    pub struct ExplainQuery {
        /// The database name.
        pub database: String,
        /// One `SELECT` statement.
        pub sql: String,
    }
}

/// Retrieval over the runbook library.
mod rag {
    use capability::Capability;

    /// A runbook that matched a search.
    pub struct RunbookHit {
        /// The runbook's path in the library.
        pub path: String,
        /// The matching passage.
        pub excerpt: String,
        /// Relevance, higher is better.
        pub score: f32,
    }

    /// Search the runbooks, by keywords or by a question in plain language.
    #[derive(Capability)]
    #[capability(read_only, idempotent, open_world = false)]
    #[capability(provider = "rag", scopes = ["rag:read"], output = Vec<RunbookHit>)]
    pub enum SearchRunbooks {
        /// Match titles and tags.
        Keywords {
            /// The words to match, all of them.
            terms: Vec<String>,
            /// The most runbooks to return.
            limit: u32,
        },
        /// Embed the question and return the nearest passages.
        Question {
            /// The question, such as "why does checkout return 502 after a deploy?".
            text: String,
            /// How many passages to return.
            top_k: u32,
        },
    }
}

/// Files on the shared ops volume.
mod files {
    use std::path::PathBuf;

    use capability::Capability;

    /// Read a text file from the ops volume.
    #[derive(Capability)]
    #[capability(read_only, idempotent, provider = "files", scopes = ["fs:read"])]
    pub struct ReadFile {
        /// The path, relative to the volume root.
        pub path: PathBuf,
        /// The most bytes to return.
        pub max_bytes: Option<u64>,
    }

    /// List a directory of the ops volume.
    #[derive(Capability)]
    #[capability(read_only, idempotent, provider = "files", scopes = ["fs:read"])]
    pub struct ListDirectory {
        /// The path, relative to the volume root.
        pub path: PathBuf,
        /// Descend into subdirectories.
        pub recursive: bool,
    }

    /// Write an incident report as Markdown under `reports/`. Never overwrites a file.
    #[derive(Capability)]
    #[capability(destructive = false, provider = "files", scopes = ["fs:write"])]
    pub struct WriteReport {
        /// The file name, without directories.
        pub file_name: String,
        /// The report's title.
        pub title: String,
        /// The report body, in Markdown.
        pub markdown: String,
    }
}

/// Remote shell on the fleet's hosts.
mod ssh {
    use capability::Capability;

    /// Run a shell command on a host, as the ops user.
    #[derive(Capability)]
    #[capability(destructive, provider = "ssh", scopes = ["ssh:exec"])]
    pub struct SshExec {
        /// The host name, from the inventory.
        pub host: String,
        /// The command line, run by `sh -c`.
        pub command: String,
        /// Kill the command after this many seconds.
        pub timeout_seconds: u32,
    }
}

/// Notifications to people.
mod notify {
    use capability::Capability;

    /// Post a message to a Slack channel or thread.
    ///
    /// The input is the message, so the type is named after it; the tool name is the action.
    #[derive(Capability)]
    #[capability(name = "send_slack", destructive = false)]
    #[capability(provider = "notify", scopes = ["notify:send"])]
    pub struct SlackMessage {
        /// The channel, such as `#ops-alerts`.
        pub channel: String,
        /// The message, in Slack markup.
        pub text: String,
        /// Reply in this thread instead of starting a new one.
        pub thread_ts: Option<String>,
    }
}

/// The platform's audit log.
mod audit_log {
    use capability::Capability;

    /// Read audit events: who did what, to what, and when.
    #[derive(Capability)]
    #[capability(read_only, idempotent, open_world = false)]
    #[capability(provider = "audit_log", scopes = ["audit:read"])]
    pub struct ReadAuditLog {
        /// Only events by this actor (a user or an agent).
        pub actor: Option<String>,
        /// Only events of this action, such as `k8s.pod.delete`.
        pub action: Option<String>,
        /// The start of the window (RFC 3339).
        pub since: String,
        /// The most events to return.
        pub limit: u32,
    }
}

/// The on-call operator: binds every tool, including the ones that restart, delete and run
/// commands. An `#[agent]` is not an advisor, so nothing restricts it.
#[agent(tools(
    k8s::ListPods,
    k8s::ListNamespaces,
    k8s::GetPodLogs,
    k8s::DescribeDeployment,
    k8s::RestartPod,
    k8s::ScaleDeployment,
    k8s::DeletePod,
    k8s::ApplyManifest,
    prometheus::Query,
    prometheus::QueryRange,
    prometheus::ListAlerts,
    grafana::GetDashboard,
    grafana::CreateAnnotation,
    signoz::SearchTraces,
    signoz::GetTrace,
    database::RunSelect,
    database::ExplainQuery,
    rag::SearchRunbooks,
    files::ReadFile,
    files::ListDirectory,
    files::WriteReport,
    ssh::SshExec,
    notify::SlackMessage,
    audit_log::ReadAuditLog,
))]
struct Operator;

/// Watches the fleet: metrics, dashboards, traces and the read side of Kubernetes.
#[advisor_agent(
    tools(
        prometheus::Query,
        prometheus::QueryRange,
        prometheus::ListAlerts,
        grafana::GetDashboard,
        signoz::SearchTraces,
        signoz::GetTrace,
        k8s::ListPods,
        k8s::ListNamespaces,
        k8s::GetPodLogs,
        k8s::DescribeDeployment,
    ),
    target = "research"
)]
struct Monitor;

/// Explains what happened: data, runbooks, files and metrics.
#[advisor_agent(
    tools(
        database::RunSelect,
        database::ExplainQuery,
        rag::SearchRunbooks,
        files::ReadFile,
        files::ListDirectory,
        prometheus::Query,
        prometheus::QueryRange,
    ),
    target = "analysis"
)]
struct Analyst;

/// Reconstructs who changed what, from read-only sources only.
#[advisor_agent(
    tools(
        audit_log::ReadAuditLog,
        k8s::ListPods,
        k8s::ListNamespaces,
        k8s::GetPodLogs,
        k8s::DescribeDeployment,
        files::ReadFile,
        files::ListDirectory,
        database::RunSelect,
    ),
    target = "research"
)]
struct Auditor;

/// The widest a description may be before it is cut.
const DESCRIPTION_WIDTH: usize = 60;
/// The widest the list of an agent's tools may be before it wraps.
const TOOL_LIST_WIDTH: usize = 72;

fn main() -> ExitCode {
    let registry = match Registry::from_inventory() {
        Ok(registry) => registry,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };

    println!("capability fleet: the registry built at startup by Registry::from_inventory()");
    println!();
    print_tools(&registry);
    println!();
    print_agents(&registry);
    println!();
    println!(
        "Advisor bindings were checked at compile time: #[advisor_agent] does not build with a"
    );
    println!("tool that is not read-only. The registry checked them again at startup.");
    println!();
    println!("Legend: R read-only, D destructive, I idempotent, W open world; x = yes, - = no.");

    let read_only = registry.tools().filter(|t| t.read_only()).count();
    let advisors = registry.agents().filter(|a| a.is_advisor()).count();
    println!(
        "{} tools ({read_only} read-only), {} agents ({advisors} advisors)",
        registry.tools().len(),
        registry.agents().len(),
    );
    ExitCode::SUCCESS
}

/// The TOOLS table, grouped by provider.
fn print_tools(registry: &Registry) {
    let mut tools: Vec<&CapabilityManifest> = registry.tools().collect();
    tools.sort_by(|a, b| (a.provider(), a.name()).cmp(&(b.provider(), b.name())));

    let rows: Vec<Vec<String>> = tools
        .iter()
        .map(|tool| {
            vec![
                qualified_name(tool),
                mark(tool.read_only()),
                mark(tool.destructive()),
                mark(tool.idempotent()),
                mark(tool.open_world()),
                tool.required_scopes().join(","),
                tool.schema_version().to_owned(),
                tool.descriptor_hash().chars().take(12).collect(),
                first_line(tool.description(), DESCRIPTION_WIDTH),
            ]
        })
        .collect();
    println!("TOOLS");
    print_table(
        &[
            "TOOL",
            "R",
            "D",
            "I",
            "W",
            "SCOPES",
            "VERSION",
            "HASH",
            "DESCRIPTION",
        ],
        &rows,
    );
}

/// The AGENTS table, with each agent's tool list wrapped under its column.
fn print_agents(registry: &Registry) {
    let rows: Vec<Vec<String>> = registry
        .agents()
        .flat_map(|spec| {
            let lines = wrap(
                spec.tools().iter().map(CapabilityManifest::name),
                TOOL_LIST_WIDTH,
            );
            agent_rows(spec, lines)
        })
        .collect();
    println!("AGENTS");
    print_table(
        &["AGENT", "TARGET", "ADVISOR", "TOOLS", "BOUND TOOLS"],
        &rows,
    );
}

/// One row for the agent, then one continuation row per further line of its tool list.
fn agent_rows(spec: &AgentSpec, lines: Vec<String>) -> Vec<Vec<String>> {
    let mut lines = lines.into_iter();
    let first = vec![
        spec.name().to_owned(),
        spec.target().to_string(),
        if spec.is_advisor() { "yes" } else { "no" }.to_owned(),
        spec.tools().len().to_string(),
        lines.next().unwrap_or_default(),
    ];
    std::iter::once(first)
        .chain(lines.map(|line| {
            let mut row = vec![String::new(); 4];
            row.push(line);
            row
        }))
        .collect()
}

/// Prints a header, a rule and the rows, each column as wide as its widest cell.
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    print_row(&header, &widths);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    print_row(&rule, &widths);
    for row in rows {
        print_row(row, &widths);
    }
}

fn print_row(cells: &[String], widths: &[usize]) {
    let line: Vec<String> = cells
        .iter()
        .zip(widths)
        .map(|(cell, width)| format!("{cell:<width$}"))
        .collect();
    println!("{}", line.join("  ").trim_end());
}

/// `provider/name`, or the name alone for a tool without a provider.
fn qualified_name(tool: &CapabilityManifest) -> String {
    match tool.provider() {
        Some(provider) => format!("{provider}/{}", tool.name()),
        None => tool.name().to_owned(),
    }
}

fn mark(set: bool) -> String {
    if set { "x" } else { "-" }.to_owned()
}

/// The first line of a description, cut to `width` characters with an ellipsis.
fn first_line(description: Option<&str>, width: usize) -> String {
    let line = description
        .and_then(|d| d.lines().next())
        .unwrap_or("(no description)");
    if line.chars().count() <= width {
        line.to_owned()
    } else {
        let cut: String = line.chars().take(width.saturating_sub(1)).collect();
        format!("{}…", cut.trim_end())
    }
}

/// Joins words with ", " into lines of at most `width` characters, the trailing comma included
/// (a longer word gets a line of its own).
fn wrap<'a>(words: impl IntoIterator<Item = &'a str>, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    for word in words {
        if !current.is_empty()
            && current.chars().count() + 2 + word.chars().count() > width.saturating_sub(1)
        {
            current.push(',');
            lines.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push_str(", ");
        }
        current.push_str(word);
    }
    if !current.is_empty() {
        lines.push(current);
    }
    lines
}
