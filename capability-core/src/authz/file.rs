//! The policy file as written: the tables and keys serde reads, each with its span, before
//! `policy.rs` checks them.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::approvals::ApprovalsFile;
use super::edge::{AuthFile, HttpFile};
use super::rules::Ceiling;
use super::servers::ServerFile;
use crate::manifest::Assertion;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicyFile {
    pub(super) version: Option<String>,
    #[serde(default)]
    pub(super) servers: BTreeMap<Spanned<String>, ServerFile>,
    #[serde(default)]
    pub(super) roles: BTreeMap<Spanned<String>, RoleFile>,
    #[serde(default)]
    pub(super) assertions: BTreeMap<Spanned<String>, Assertion>,
    /// `"sha256:<hex>" = "<role>"`: the role a bearer token gives, by the token's hash.
    #[serde(default)]
    pub(super) bearer_tokens: BTreeMap<Spanned<String>, Spanned<String>>,
    /// The OAuth 2.1 resource server's settings (`edge.rs`).
    pub(super) auth: Option<AuthFile>,
    /// The HTTP edge's limits (`edge.rs`).
    pub(super) http: Option<HttpFile>,
    /// Who approves held-back calls (`approvals.rs`).
    pub(super) approvals: Option<ApprovalsFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RoleFile {
    pub(super) ceiling: Ceiling,
    #[serde(default)]
    pub(super) closed_world_only: bool,
    #[serde(default)]
    pub(super) allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) deny: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) scopes: Vec<Spanned<String>>,
    /// `server/URI` globs of the resources the role may read (see `items.rs`).
    #[serde(default)]
    pub(super) resources: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) deny_resources: Vec<Spanned<String>>,
    /// `server/name` globs of the prompts the role may get.
    #[serde(default)]
    pub(super) prompts: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) deny_prompts: Vec<Spanned<String>>,
    /// `server/kind` globs of the requests servers may send the role's client.
    #[serde(default)]
    pub(super) server_requests: Vec<Spanned<String>>,
    /// `provider/tool` globs of the tools a call of which needs a human's approval.
    #[serde(default)]
    pub(super) approve: Vec<Spanned<String>>,
    /// `provider/tool` globs of the tools a call of which the client's human may confirm.
    #[serde(default)]
    pub(super) confirm: Vec<Spanned<String>>,
}
