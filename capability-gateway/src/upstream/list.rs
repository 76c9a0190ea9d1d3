//! What a server lists: its tools, and its resources, templates and prompts, page by page.

use ::rmcp::model::Tool;
use ::rmcp::{Peer, RoleClient};

use capability::mcp::Server;

/// What one server lists besides its tools.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Listed {
    pub(crate) resources: Vec<::rmcp::model::Resource>,
    pub(crate) templates: Vec<::rmcp::model::ResourceTemplate>,
    pub(crate) prompts: Vec<::rmcp::model::Prompt>,
}

/// The most pages a server's list of resources, templates or prompts may take.
const MAX_PAGES: usize = 100;

/// How long one page of such a list may take: a server that does not answer serves none of
/// that kind, rather than keep the fleet from starting.
const PAGE_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Every page of one list: `page` asks for the page at a cursor and answers its items and the
/// next cursor. A cursor seen twice (a loop) or more than [`MAX_PAGES`] pages is an error.
async fn pages<T, F, Fut>(what: &str, mut page: F) -> Result<Vec<T>, String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>), ::rmcp::ServiceError>>,
{
    let mut items = Vec::new();
    let mut cursor = None;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..MAX_PAGES {
        let (more, next) = tokio::time::timeout(PAGE_WITHIN, page(cursor.take()))
            .await
            .map_err(|_| format!("did not list its {what} within {} s", PAGE_WITHIN.as_secs()))?
            .map_err(|e| format!("did not list its {what}: {e}"))?;
        items.extend(more);
        match next {
            None => return Ok(items),
            Some(next) if !seen.insert(next.clone()) => {
                return Err(format!(
                    "did not list its {what}: the cursor {next:?} came twice (a pagination loop)"
                ));
            }
            Some(next) => cursor = Some(next),
        }
    }
    Err(format!(
        "did not list its {what}: still more pages after {MAX_PAGES}"
    ))
}

/// The resources, resource templates and prompts of `peer`'s server, each kind listed only
/// when the server says it has it. A kind that cannot be listed is served empty, and said.
pub(crate) async fn list_items(peer: &Peer<RoleClient>, server: &str) -> Listed {
    list_served_items(peer, server, true, true).await
}

/// [`list_items`], of the kinds served (`resources`, `prompts`): the others are not asked.
pub(crate) async fn list_served_items(
    peer: &Peer<RoleClient>,
    server: &str,
    resources: bool,
    prompts: bool,
) -> Listed {
    use ::rmcp::model::PaginatedRequestParams;
    let params = |cursor| Some(PaginatedRequestParams::default().with_cursor(cursor));
    let capabilities = peer.peer_info().map(|info| info.capabilities.clone());
    let has_resources = resources && capabilities.as_ref().is_some_and(|c| c.resources.is_some());
    let has_prompts = prompts && capabilities.as_ref().is_some_and(|c| c.prompts.is_some());
    fn kept<T>(server: &str, listed: Result<Vec<T>, String>) -> Vec<T> {
        listed.unwrap_or_else(|why| {
            crate::note(format_args!(
                "server `{server}` {}: none of them is served",
                crate::escape::escape(&why)
            ));
            Vec::new()
        })
    }
    let mut listed = Listed::default();
    if has_resources {
        listed.resources = kept(
            server,
            pages("resources", |cursor| async move {
                let page = peer.list_resources(params(cursor)).await?;
                Ok((page.resources, page.next_cursor))
            })
            .await,
        );
        listed.templates = kept(
            server,
            pages("resource templates", |cursor| async move {
                let page = peer.list_resource_templates(params(cursor)).await?;
                Ok((page.resource_templates, page.next_cursor))
            })
            .await,
        );
    }
    if has_prompts {
        listed.prompts = kept(
            server,
            pages("prompts", |cursor| async move {
                let page = peer.list_prompts(params(cursor)).await?;
                Ok((page.prompts, page.next_cursor))
            })
            .await,
        );
    }
    listed
}

/// Every tool of `peer`'s server.
pub(crate) async fn list(peer: &Peer<RoleClient>, server: &Server) -> Result<Vec<Tool>, String> {
    capability::rmcp::list_tools(peer, server)
        .await
        .map_err(|e| format!("did not list its tools: {e}"))
}
