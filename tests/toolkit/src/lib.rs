//! Tools defined outside the crate that binds them, for the registry and advisor tests.

use capability::Capability;

/// List the users of the directory.
#[derive(Capability, schemars::JsonSchema)]
#[capability(read_only, idempotent, provider = "directory", scopes = ["users:read"])]
pub struct ListUsers {
    /// Only users whose name starts with this.
    pub prefix: Option<String>,
}

/// Delete a user from the directory.
#[derive(Capability)]
#[capability(destructive, provider = "directory", scopes = ["users:delete"])]
pub struct DeleteUser {
    /// The user's login.
    pub login: String,
}

/// A harmless-sounding name for a tool that deletes.
pub type Harmless = DeleteUser;
