//! The loop driver: `alert → agent loop → model tool_use → MCP tool_result → final decision`.
//!
//! One run of an [`AgentLoop`]:
//!
//! 1. A model that does not support tools degrades at once, before any turn.
//! 2. The role's visible tools are computed **once**, by the one visibility function
//!    ([`Visibility::of`]: lockfile drift, duplicate names, the decider), and only those are
//!    converted into [`ToolSpec`]s. The model never learns that a hidden tool exists.
//! 3. Turns, at most `max_iterations` of them. Before each, the provider's circuit breaker (if
//!    any) is asked; while it is open the loop degrades without calling the model. A failed
//!    turn degrades (and counts against the breaker); the loop never retries.
//! 4. Every tool call of a turn goes through the [`AuditedDispatch`] exactly once, with the
//!    decider's role and session and the caller's agent, step and incident, so every call has
//!    exactly one audit record:
//!    - a tool the model was shown, with JSON arguments: decided, run by the [`ToolExecutor`]
//!      if allowed, its output (or error) fed back as a [`Message::Tool`];
//!    - malformed arguments: recorded, never run (the record says why; the raw text is not
//!      stored); the model gets an error result;
//!    - a tool the model was not shown (hidden from the role, or not listed): recorded as a
//!      denial, never run; the model gets the error result "no tool named `x` is available",
//!      the same whether or not the server lists it. A denial counts against the session's
//!      budget like any other: beyond it, the dispatch degrades the session and so does the
//!      loop ([`Degrade::Denied`]). The budget is the dispatch's: give it ADR-105's with
//!      `AuditedDispatch::new(sink).with_budget(Budget::default())` (25 calls, the first denial
//!      degrades); a dispatch without one only refuses each denied call, and the loop goes on.
//!
//!    The calls of the last permitted turn are handled too; if the model then still has no
//!    final answer, the loop degrades with [`Degrade::IterationsExceeded`].
//! 5. The run ends with [`LoopOutcome::Answer`] or [`LoopOutcome::Degraded`]. On a degrade the
//!    caller falls back to its existing path (pre-gathered evidence, rules, playbooks).
//!
//! The conversation is the caller's `Vec<Message>`: the loop appends each assistant turn and
//! each tool result to it, so what was gathered before a degrade is still there.

mod calls;
mod outcome;

use std::sync::Arc;

use serde_json::Value;

use capability_audit::{AuditedDispatch, Caller};
use capability_core::authz::Authorize;
use capability_core::manifest::{CapabilityManifest, ManifestError};
use capability_mcp::{Fleet, Lockfile, McpManifest, Server, Visibility};

use crate::breaker::Breaker;
use crate::model::{Message, Model, ModelErrorKind, ToolSpec};

pub use outcome::{Degrade, LoopOutcome};

use calls::{Context, Stop};

/// The default `max_iterations`: model turns per run.
pub const DEFAULT_MAX_ITERATIONS: u32 = 8;

/// Runs a tool the loop has decided to run. The loop calls it only for a tool the model was
/// shown, with JSON arguments, once the audited dispatch allowed the call.
///
/// Any `Fn(&str, &Value) -> Result<Value, String>` is one.
pub trait ToolExecutor {
    /// Runs `name` with `arguments`: its output, or its error as text.
    fn call(&self, name: &str, arguments: &Value) -> Result<Value, String>;
}

impl<F> ToolExecutor for F
where
    F: Fn(&str, &Value) -> Result<Value, String>,
{
    fn call(&self, name: &str, arguments: &Value) -> Result<Value, String> {
        self(name, arguments)
    }
}

/// Where the tools come from: one MCP server's tool list (MCP `Tool` objects, in its order),
/// with or without a lockfile.
#[derive(Clone, Copy, Debug)]
pub struct ToolSource<'a> {
    /// The server (its name is the tools' provider; its trust says how far its annotations
    /// are believed).
    pub server: &'a Server,
    /// The tools it lists.
    pub tools: &'a [Value],
    /// The lockfile, if one is in use: then only tools matching their pins can be visible.
    pub lock: Option<&'a Lockfile>,
}

impl<'a> ToolSource<'a> {
    /// `server`'s tool list, without a lockfile.
    pub fn new(server: &'a Server, tools: &'a [Value]) -> Self {
        ToolSource {
            server,
            tools,
            lock: None,
        }
    }

    /// The same list, reviewed against `lock`.
    pub fn locked(mut self, lock: &'a Lockfile) -> Self {
        self.lock = Some(lock);
        self
    }
}

/// What one caller is shown of a tool source: the visibility, computed once, and the specs of
/// the visible tools (and of nothing else), in the server's order.
#[derive(Clone, Debug)]
pub struct Shown {
    visibility: Visibility,
    /// The name the model sees of each tool of `visibility`, in its order: the tool's own, or
    /// its server's prefix and its own behind a fleet.
    names: Vec<String>,
    specs: Vec<ToolSpec>,
    /// The provider of a tool the source does not list (`None` for a fleet).
    provider: Option<String>,
}

impl Shown {
    /// What `decider` may see of `source`, through [`Visibility::of`].
    pub fn of(
        source: &ToolSource<'_>,
        decider: &(impl Authorize + ?Sized),
    ) -> Result<Shown, ManifestError> {
        let visibility = Visibility::of(source.server, source.tools, source.lock, decider)?;
        // Visible names are unique (tools sharing a name are all hidden), so the MCP object of
        // each is the one listed under its name.
        let specs = visibility
            .visible()
            .filter_map(|manifest| {
                source
                    .tools
                    .iter()
                    .find(|tool| tool.get("name").and_then(Value::as_str) == Some(manifest.name()))
                    .and_then(ToolSpec::from_mcp_tool)
            })
            .collect();
        let names = visibility
            .tools()
            .iter()
            .map(|t| t.manifest().name().to_owned())
            .collect();
        Ok(Shown {
            visibility,
            names,
            specs,
            provider: Some(source.server.name().to_owned()),
        })
    }

    /// What `decider` may see of a fleet of servers ([`Fleet::for_caller`]): their union, each
    /// tool under its shown name (its server's prefix and its name), each decided on its own
    /// manifest. The executor is given the shown name: [`Fleet::route`] takes it to the server
    /// and the tool's own name.
    ///
    /// ```
    /// use capability_agent::driver::Shown;
    /// use capability_core::authz::{Ceiling, ToolContext};
    /// use capability_mcp::{Fleet, Listing, Server};
    /// use serde_json::json;
    ///
    /// let tool = |name: &str, read_only: bool| json!({"name": name, "inputSchema": {"type": "object"},
    ///     "annotations": {"readOnlyHint": read_only}});
    /// let k8s = Listing::read(&Server::trusted("k8s"), &[tool("list_pods", true), tool("delete_pod", false)], None)?;
    /// let prom = Listing::read(&Server::trusted("prometheus"), &[tool("query", true)], None)?;
    /// let fleet = Fleet::new([(k8s, "k8s_".into()), (prom, "prom_".into())])?;
    /// let shown = Shown::of_fleet(&fleet, &ToolContext::new("monitor", "s-1", Ceiling::ReadOnly));
    /// let names: Vec<&str> = shown.specs().iter().map(|s| s.name.as_str()).collect();
    /// assert_eq!(names, ["k8s_list_pods", "prom_query"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`Fleet::for_caller`]: capability_mcp::Fleet::for_caller
    /// [`Fleet::route`]: capability_mcp::Fleet::route
    pub fn of_fleet(fleet: &Fleet, decider: &(impl Authorize + ?Sized)) -> Shown {
        let view = fleet.for_caller(decider);
        let specs = view
            .visible()
            .filter_map(|tool| {
                let mut object = tool.manifest().to_mcp_tool();
                object["name"] = Value::String(tool.shown.clone());
                ToolSpec::from_mcp_tool(&object)
            })
            .collect();
        let names = view.tools().iter().map(|t| t.shown.clone()).collect();
        Shown {
            visibility: view.visibility(),
            names,
            specs,
            provider: None,
        }
    }

    /// The specs the model is shown.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// The visibility they were computed from (with every hidden tool and why).
    pub fn visibility(&self) -> &Visibility {
        &self.visibility
    }

    /// The manifests of the tools the model is shown.
    pub fn visible(&self) -> impl Iterator<Item = &CapabilityManifest> {
        self.visibility
            .tools()
            .iter()
            .zip(&self.names)
            .filter(|(t, name)| t.is_visible() && self.specs.iter().any(|s| s.name == **name))
            .map(|(t, _)| t.manifest())
    }

    /// The manifest of the shown tool `name`.
    fn manifest(&self, name: &str) -> Option<&CapabilityManifest> {
        if !self.specs.iter().any(|s| s.name == name) {
            return None;
        }
        self.visibility
            .tools()
            .iter()
            .zip(&self.names)
            .find(|(t, shown)| t.is_visible() && *shown == name)
            .map(|(t, _)| t.manifest())
    }

    /// The manifest of a listed tool `name`, shown or not (the first, for a duplicate name).
    fn listed(&self, name: &str) -> Option<&CapabilityManifest> {
        self.visibility
            .tools()
            .iter()
            .zip(&self.names)
            .find(|(_, shown)| *shown == name)
            .map(|(t, _)| t.manifest())
    }

    /// A manifest standing in, in the audit trail, for a tool the server does not list.
    fn stand_in(&self, name: &str) -> Option<CapabilityManifest> {
        let builder = |tool: &str| {
            let builder = CapabilityManifest::builder(tool);
            match &self.provider {
                Some(provider) => builder.provider(provider.as_str()),
                None => builder,
            }
        };
        builder(name)
            .build()
            .or_else(|_| builder("unlisted_tool").build())
            .or_else(|_| CapabilityManifest::builder("unlisted_tool").build())
            .ok()
    }
}

/// The loop driver. Cheap to build; one per caller configuration.
///
/// ```
/// use std::sync::Arc;
/// use capability_audit::{AuditedDispatch, Caller, MemorySink};
/// use capability_core::authz::{Ceiling, ToolContext};
/// use capability_mcp::Server;
/// use capability_agent::driver::{AgentLoop, ToolSource};
/// use capability_agent::{Message, Model, ModelError, ToolSpec, Turn};
/// use serde_json::{Value, json};
///
/// struct Answers;
/// impl Model for Answers {
///     fn provider(&self) -> &str { "scripted" }
///     fn supports_tools(&self) -> bool { true }
///     fn turn(&mut self, _: &[Message], tools: &[ToolSpec]) -> Result<Turn, ModelError> {
///         assert_eq!(tools.len(), 1, "only the read-only tool is shown");
///         Ok(Turn { text: Some("all pods are running".into()), tool_calls: vec![] })
///     }
/// }
///
/// let tools = [
///     json!({"name": "list_pods", "inputSchema": {"type": "object"},
///            "annotations": {"readOnlyHint": true}}),
///     json!({"name": "restart_pod", "inputSchema": {"type": "object"}}),
/// ];
/// let server = Server::trusted("k8s");
/// let sink = Arc::new(MemorySink::new());
/// let dispatch = AuditedDispatch::new(sink);
/// let monitor = ToolContext::new("monitor", "s-1", Ceiling::ReadOnly);
/// let run = |_: &str, _: &Value| -> Result<Value, String> { Ok(json!([])) };
///
/// let mut messages = vec![Message::User("is checkout healthy?".into())];
/// let outcome = AgentLoop::new(&dispatch).run(
///     &mut Answers, &mut messages, &ToolSource::new(&server, &tools),
///     &monitor, Caller::new("watcher").step("triage"), &run,
/// );
/// assert_eq!(outcome.answer(), Some("all pods are running"));
/// ```
#[derive(Clone, Debug)]
pub struct AgentLoop<'a> {
    dispatch: &'a AuditedDispatch,
    max_iterations: u32,
    breaker: Option<Arc<Breaker>>,
}

impl<'a> AgentLoop<'a> {
    /// A loop dispatching through `dispatch`, with [`DEFAULT_MAX_ITERATIONS`] and no breaker.
    /// The session's budget is the dispatch's ([`AuditedDispatch::with_budget`]).
    pub fn new(dispatch: &'a AuditedDispatch) -> Self {
        AgentLoop {
            dispatch,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            breaker: None,
        }
    }

    /// Sets the most model turns a run makes.
    pub fn max_iterations(mut self, max: u32) -> Self {
        self.max_iterations = max;
        self
    }

    /// Guards the provider with `breaker` (shared with other loops).
    pub fn breaker(mut self, breaker: Arc<Breaker>) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// One run over `source`'s tools, as `decider` (a role and session) and `caller` (agent,
    /// step, incident). `messages` is the conversation: the loop appends to it.
    pub fn run<M, D, X>(
        &self,
        model: &mut M,
        messages: &mut Vec<Message>,
        source: &ToolSource<'_>,
        decider: &D,
        caller: Caller<'_>,
        executor: &X,
    ) -> LoopOutcome
    where
        M: Model + ?Sized,
        D: Authorize + ?Sized,
        X: ToolExecutor + ?Sized,
    {
        if !model.supports_tools() {
            return degraded(Degrade::NoToolSupport {
                provider: model.provider().to_owned(),
            });
        }
        match Shown::of(source, decider) {
            Ok(shown) => self.run_shown(model, messages, &shown, decider, caller, executor),
            Err(error) => degraded(Degrade::InvalidTools {
                error: error.to_string(),
            }),
        }
    }

    /// One run over tools already computed for `decider` (by [`Shown::of`] with the same
    /// decider).
    pub fn run_shown<M, D, X>(
        &self,
        model: &mut M,
        messages: &mut Vec<Message>,
        shown: &Shown,
        decider: &D,
        caller: Caller<'_>,
        executor: &X,
    ) -> LoopOutcome
    where
        M: Model + ?Sized,
        D: Authorize + ?Sized,
        X: ToolExecutor + ?Sized,
    {
        let provider = model.provider().to_owned();
        if !model.supports_tools() {
            return degraded(Degrade::NoToolSupport { provider });
        }
        let context = Context {
            dispatch: self.dispatch,
            shown,
            decider,
            caller,
            executor,
        };
        let mut tool_calls = 0u32;
        for iteration in 1..=self.max_iterations {
            let stop = |degrade, iterations| LoopOutcome::Degraded {
                degrade,
                iterations,
                tool_calls,
            };
            if let Some(breaker) = &self.breaker
                && let Err(until) = breaker.admit(&provider)
            {
                return stop(Degrade::BreakerOpen { provider, until }, iteration - 1);
            }
            let turn = match model.turn(messages, shown.specs()) {
                Ok(turn) => {
                    self.report(&provider, true);
                    turn
                }
                Err(error) if error.kind == ModelErrorKind::NoToolSupport => {
                    self.report(&provider, true);
                    return stop(Degrade::NoToolSupport { provider }, iteration);
                }
                Err(error) => {
                    self.report(&provider, false);
                    return stop(Degrade::ProviderFailing { provider, error }, iteration);
                }
            };
            messages.push(Message::Assistant(turn.clone()));
            if turn.is_final() {
                return LoopOutcome::Answer {
                    text: turn.text.unwrap_or_default(),
                    iterations: iteration,
                    tool_calls,
                };
            }
            let mut ended = None;
            for call in &turn.tool_calls {
                let handled = context.handle(call);
                tool_calls = tool_calls.saturating_add(1);
                messages.push(Message::Tool(handled.result));
                match handled.stop {
                    // The rest of the turn's calls go to the dispatch too: each gets its record
                    // (degraded, not run).
                    Some(Stop::Degrade(reason)) => {
                        ended.get_or_insert(Degrade::Denied { reason });
                    }
                    Some(Stop::AuditFailed(error)) => {
                        ended = Some(Degrade::AuditFailed { error });
                        break;
                    }
                    None => {}
                }
            }
            if let Some(degrade) = ended {
                return LoopOutcome::Degraded {
                    degrade,
                    iterations: iteration,
                    tool_calls,
                };
            }
        }
        LoopOutcome::Degraded {
            degrade: Degrade::IterationsExceeded {
                max: self.max_iterations,
            },
            iterations: self.max_iterations,
            tool_calls,
        }
    }

    fn report(&self, provider: &str, success: bool) {
        if let Some(breaker) = &self.breaker {
            if success {
                breaker.success(provider);
            } else {
                breaker.failure(provider);
            }
        }
    }
}

fn degraded(degrade: Degrade) -> LoopOutcome {
    LoopOutcome::Degraded {
        degrade,
        iterations: 0,
        tool_calls: 0,
    }
}
