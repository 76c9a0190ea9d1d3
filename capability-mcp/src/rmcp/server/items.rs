//! Everything but tools, governed: resources, prompts, completion, skills (filtered lists;
//! reads and gets decided and recorded), and tasks (served only to the session that made them).

use ::rmcp::model::{
    CacheScope, CancelTaskParams, CompleteRequestParams, CompleteResult, GetPromptRequestParams,
    GetPromptResponse, GetSkillRequestParams, GetSkillResult, GetTaskParams, GetTaskResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult,
    PaginatedRequestParams, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult,
    ReadResourceRequestParams, ReadResourceResponse, Reference, SubscribeRequestParams,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::{Serialize, Serializer};
use serde_json::{Value, json};

use capability_audit::Request;
use capability_core::authz::{Action, Authorize, DenyReason};

use super::{Asked, GovernedServer, Who, input, lock};
use crate::visibility::WithheldReason;

impl<H: ServerHandler> GovernedServer<H> {
    /// Whether `who`'s role may use `action` (a caller without a role may use nothing).
    fn allows(&self, decider: Option<&impl Authorize>, action: &Action<'_>) -> bool {
        decider.is_some_and(|d| d.decide_action(action).is_allowed())
    }

    fn resource<'a>(&'a self, uri: &'a str) -> Action<'a> {
        Action::Resource {
            server: self.server.name(),
            uri,
        }
    }

    pub(super) async fn governed_list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let who = self.who(&context);
        let Some(decider) = self.decider(&who) else {
            return Ok(private(ListResourcesResult::default()));
        };
        let mut page = self.inner.list_resources(request, context).await?;
        page.resources
            .retain(|r| self.allows(Some(&decider), &self.resource(&r.uri)));
        page.cache_scope = Some(CacheScope::Private);
        Ok(page)
    }

    pub(super) async fn governed_list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let who = self.who(&context);
        let Some(decider) = self.decider(&who) else {
            return Ok(private(ListResourceTemplatesResult::default()));
        };
        let mut page = self.inner.list_resource_templates(request, context).await?;
        page.resource_templates
            .retain(|t| self.allows(Some(&decider), &self.resource(&t.uri_template)));
        page.cache_scope = Some(CacheScope::Private);
        Ok(page)
    }

    pub(super) async fn governed_read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let who = self.who(&context);
        let uri = request.uri.clone();
        let recorded = input(&[("uri", json!(uri))]);
        let call = Request::mcp("resources/read", self.resource(&uri), &recorded);
        let run = async { self.inner.read_resource(request, context).await.map(Read) };
        let Read(read) = self
            .act(&who, &call, Asked::Resource(&uri), &[], run)
            .await?;
        Ok(read)
    }

    pub(super) async fn governed_subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let who = self.who(&context);
        let uri = request.uri.clone();
        let recorded = input(&[("uri", json!(uri))]);
        let call = Request::mcp("resources/subscribe", self.resource(&uri), &recorded);
        #[allow(deprecated)]
        let run = self.inner.subscribe(request, context);
        self.act(&who, &call, Asked::Resource(&uri), &[], run).await
    }

    pub(super) async fn governed_unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let who = self.who(&context);
        let uri = request.uri.clone();
        let recorded = input(&[("uri", json!(uri))]);
        let call = Request::mcp("resources/unsubscribe", self.resource(&uri), &recorded);
        #[allow(deprecated)]
        let run = self.inner.unsubscribe(request, context);
        self.act(&who, &call, Asked::Resource(&uri), &[], run).await
    }

    pub(super) async fn governed_read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        let who = self.who(&context);
        let decider = self.decider(&who);
        let uri = request.uri.clone();
        let recorded = input(&[("uri", json!(uri))]);
        let call = Request::mcp("resources/directory/read", self.resource(&uri), &recorded);
        let run = self.inner.read_resource_directory(request, context);
        let mut page = self
            .act(&who, &call, Asked::Resource(&uri), &[], run)
            .await?;
        page.resources
            .retain(|r| self.allows(decider.as_ref(), &self.resource(&r.uri)));
        page.cache_scope = Some(CacheScope::Private);
        Ok(page)
    }

    pub(super) async fn governed_list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let who = self.who(&context);
        let Some(decider) = self.decider(&who) else {
            return Ok(private(ListSkillsResult::default()));
        };
        let mut page = self.inner.list_skills(request, context).await?;
        page.skills
            .retain(|s| self.allows(Some(&decider), &self.resource(&s.uri)));
        page.cache_scope = Some(CacheScope::Private);
        Ok(page)
    }

    pub(super) async fn governed_get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        let who = self.who(&context);
        let uri = request.uri.clone();
        let recorded = input(&[("uri", json!(uri))]);
        let call = Request::mcp("skills/get", self.resource(&uri), &recorded);
        let run = self.inner.get_skill(request, context);
        self.act(&who, &call, Asked::Resource(&uri), &[], run).await
    }

    pub(super) async fn governed_list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let who = self.who(&context);
        let Some(decider) = self.decider(&who) else {
            return Ok(private(ListPromptsResult::default()));
        };
        let mut page = self.inner.list_prompts(request, context).await?;
        let server = self.server.name();
        page.prompts.retain(|p| {
            let prompt = Action::Prompt {
                server,
                name: &p.name,
            };
            self.allows(Some(&decider), &prompt)
        });
        page.cache_scope = Some(CacheScope::Private);
        Ok(page)
    }

    pub(super) async fn governed_get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let who = self.who(&context);
        let name = request.name.clone();
        let recorded = input(&[
            ("name", json!(name)),
            (
                "arguments",
                Value::Object(request.arguments.clone().unwrap_or_default()),
            ),
        ]);
        let prompt = Action::Prompt {
            server: self.server.name(),
            name: &name,
        };
        let call = Request::mcp("prompts/get", prompt, &recorded);
        let run = async { self.inner.get_prompt(request, context).await.map(Got) };
        let Got(got) = self
            .act(&who, &call, Asked::Prompt(&name), &[], run)
            .await?;
        Ok(got)
    }

    /// Decided on what the completion is for: a prompt's name, or a resource template's URI.
    pub(super) async fn governed_complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let who = self.who(&context);
        let server = self.server.name();
        let (action, named) = match &request.r#ref {
            Reference::Prompt(prompt) => (
                Action::Prompt {
                    server,
                    name: &prompt.name,
                },
                prompt.name.clone(),
            ),
            Reference::Resource(template) => (self.resource(&template.uri), template.uri.clone()),
            _ => {
                return Err(ErrorData::invalid_params(
                    "a completion's reference is a prompt or a resource template",
                    None,
                ));
            }
        };
        let recorded = serde_json::to_value(&request).unwrap_or(Value::Null);
        let call = Request::mcp("completion/complete", action, &recorded);
        let run = self.inner.complete(request.clone(), context);
        self.act(&who, &call, Asked::Completion(&named), &[], run)
            .await
    }

    /// A task is served only to the session whose `tools/call` created it; anyone else is
    /// refused and recorded, as for a task that does not exist.
    fn task_owner(&self, who: &Who, method: &str, task_id: &str) -> Result<(), ErrorData> {
        let owner = lock(&self.tasks).get(task_id).cloned();
        let reason = match (self.decider(who), owner) {
            (Some(_), Some(session)) if session == who.session => return Ok(()),
            (None, _) => Self::no_decider(who),
            _ => WithheldReason::Policy(DenyReason::Withheld {
                why: "no tools/call of this session created the task".to_owned(),
            }),
        };
        let recorded = input(&[("taskId", json!(task_id))]);
        let call = Request::mcp(
            method,
            Action::Resource {
                server: self.server.name(),
                uri: task_id,
            },
            &recorded,
        );
        Err(self.refuse(who, &call, Asked::Task(task_id), vec![reason], &[]))
    }

    pub(super) async fn governed_get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.task_owner(&self.who(&context), "tasks/get", &request.task_id)?;
        self.inner.get_task(request, context).await
    }

    pub(super) async fn governed_update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task_owner(&self.who(&context), "tasks/update", &request.task_id)?;
        self.inner.update_task(request, context).await
    }

    pub(super) async fn governed_cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task_owner(&self.who(&context), "tasks/cancel", &request.task_id)?;
        self.inner.cancel_task(request, context).await
    }

    /// A request that needs a role, any role: refused without one (and recorded).
    pub(super) fn needs_role(
        &self,
        context: &RequestContext<RoleServer>,
        method: &str,
    ) -> Result<(), ErrorData> {
        let who = self.who(context);
        if self.decider(&who).is_some() {
            return Ok(());
        }
        let recorded = Value::Null;
        let call = Request::mcp(
            method,
            Action::Resource {
                server: self.server.name(),
                uri: method,
            },
            &recorded,
        );
        let reasons = vec![Self::no_decider(&who)];
        Err(self.refuse(&who, &call, Asked::Tool(method), reasons, &[]))
    }
}

/// A filtered list is for this caller only.
fn private<T: Private>(mut page: T) -> T {
    page.set_private();
    page
}

trait Private {
    fn set_private(&mut self);
}

macro_rules! private {
    ($($t:ty),*) => {$(
        impl Private for $t {
            fn set_private(&mut self) {
                self.cache_scope = Some(CacheScope::Private);
            }
        }
    )*};
}

private!(
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListPromptsResult,
    ListSkillsResult
);

/// The inner handler's read, recorded as the result it is sent as.
struct Read(ReadResourceResponse);

impl Serialize for Read {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            ReadResourceResponse::Complete(result) => result.serialize(serializer),
            ReadResourceResponse::InputRequired(result) => result.serialize(serializer),
            _ => serializer.serialize_none(),
        }
    }
}

/// The inner handler's prompt, recorded as the result it is sent as.
struct Got(GetPromptResponse);

impl Serialize for Got {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            GetPromptResponse::Complete(result) => result.serialize(serializer),
            GetPromptResponse::InputRequired(result) => result.serialize(serializer),
            _ => serializer.serialize_none(),
        }
    }
}
