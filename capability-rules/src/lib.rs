//! The rules of a capability manifest, written once.
//!
//! This crate is an implementation detail of `capability`: the derive macro (at compile time) and
//! the runtime builder (for tools that arrive at run time) both call it, so a manifest that one of
//! them accepts the other accepts too. It holds:
//!
//! - the attribute keys and advisor targets ([`TOOL_KEYS`], [`ADVISOR_TARGETS`], ...),
//! - the validation of one draft manifest ([`validate`]), with every problem reported at once,
//! - the MCP defaults for the four hints ([`Flags::resolve`]),
//! - the canonical descriptor and its SHA-256 hash ([`Descriptor`]),
//! - small helpers the messages need ([`snake_case`], [`closest`]),
//! - the one hex encoder and decoder of the workspace ([`hex`]).
//!
//! Nothing here knows about spans or tokens: each problem names its [`Subject`] and the caller
//! decides where to point.

#![forbid(unsafe_code)]

mod descriptor;
pub mod hex;
mod text;

pub use descriptor::{Descriptor, Shape, sha256_hex, write_json_string};
pub use text::{closest, snake_case};

use std::fmt;

/// Every key `#[capability(...)]` accepts, in the order the reference table lists them.
pub const TOOL_KEYS: &[&str] = &[
    "read_only",
    "destructive",
    "idempotent",
    "open_world",
    "scopes",
    "name",
    "title",
    "description",
    "provider",
    "output",
    "version",
    "sensitive",
    "crate",
];

/// Every key `#[advisor_agent(...)]` accepts.
pub const ADVISOR_KEYS: &[&str] = &["tools", "target", "name", "crate"];

/// Every key `#[agent(...)]` accepts.
pub const AGENT_KEYS: &[&str] = &["tools", "name", "crate"];

/// The targets an advisor agent may have. Advisors only read.
pub const ADVISOR_TARGETS: &[&str] = &["research", "selection", "analysis"];

/// Verbs that, as the last segment of a scope, ask for the right to change something.
///
/// A read-only tool that requires such a scope contradicts itself.
pub const MUTATING_VERBS: &[&str] = &[
    "write", "delete", "admin", "exec", "execute", "create", "update", "patch", "put", "post",
    "modify", "remove", "manage", "restart", "scale", "apply", "kill", "drop", "deploy", "send",
    "push", "mutate", "rw", "all", "*",
];

/// The longest tool name the MCP specification allows.
pub const MAX_NAME_LEN: usize = 128;

/// The longest provider name and version string accepted.
pub const MAX_LABEL_LEN: usize = 64;

/// The four behaviour hints of a tool, after defaults are applied.
///
/// The defaults are the MCP ones (`ToolAnnotations` in the MCP schema): a tool that says nothing
/// is not read-only, is destructive, is not idempotent and reaches an open world. That is the
/// fail-closed reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Flags {
    /// The tool does not modify its environment (`readOnlyHint`).
    pub read_only: bool,
    /// A write may be destructive rather than additive (`destructiveHint`).
    pub destructive: bool,
    /// Calling it twice with the same arguments has no further effect (`idempotentHint`).
    pub idempotent: bool,
    /// It interacts with an open world of external entities (`openWorldHint`).
    pub open_world: bool,
}

impl Flags {
    /// Applies the MCP defaults to the hints that were given.
    ///
    /// `destructive` defaults to `false` for a read-only tool (MCP: the hint is meaningful only
    /// when the tool is not read-only) and to `true` otherwise. A read-only tool that also says
    /// `destructive = true` is an error.
    pub fn resolve(
        read_only: Option<bool>,
        destructive: Option<bool>,
        idempotent: Option<bool>,
        open_world: Option<bool>,
    ) -> Result<Flags, Violation> {
        if matches!(read_only, Some(true)) && matches!(destructive, Some(true)) {
            return Err(Violation::ReadOnlyAndDestructive);
        }
        Ok(Flags::defaulted(
            read_only,
            destructive,
            idempotent,
            open_world,
        ))
    }

    /// The MCP defaults applied to what was given, the one place they are written: a tool that
    /// says nothing is not read-only, destructive, not idempotent and open-world; a read-only tool
    /// is never destructive, whatever `destructive` says (callers that must refuse that
    /// contradiction use [`Flags::resolve`]). A `const fn`, so manifests of derived tools can be
    /// resolved at compile time.
    pub const fn defaulted(
        read_only: Option<bool>,
        destructive: Option<bool>,
        idempotent: Option<bool>,
        open_world: Option<bool>,
    ) -> Flags {
        let read_only = or(read_only, false);
        Flags {
            read_only,
            destructive: !read_only && or(destructive, true),
            idempotent: or(idempotent, false),
            open_world: or(open_world, true),
        }
    }
}

/// `value`, or `default` when there is none (`Option::unwrap_or` in a `const fn`).
const fn or(value: Option<bool>, default: bool) -> bool {
    match value {
        Some(value) => value,
        None => default,
    }
}

/// What a manifest author wrote, before validation.
#[derive(Clone, Debug, Default)]
pub struct Draft<'a> {
    /// The tool name.
    pub name: &'a str,
    /// The provider, if any.
    pub provider: Option<&'a str>,
    /// The explicit schema version, if any.
    pub version: Option<&'a str>,
    /// `readOnlyHint`, if given.
    pub read_only: Option<bool>,
    /// `destructiveHint`, if given.
    pub destructive: Option<bool>,
    /// `idempotentHint`, if given.
    pub idempotent: Option<bool>,
    /// `openWorldHint`, if given.
    pub open_world: Option<bool>,
    /// The required scopes, as written (order and repeats do not matter).
    pub scopes: Vec<&'a str>,
}

/// A draft that passed every rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validated {
    /// The hints with defaults applied.
    pub flags: Flags,
    /// The scopes, sorted and de-duplicated.
    pub scopes: Vec<String>,
}

/// Which part of a draft a problem is about, so the caller can point at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The tool name.
    Name,
    /// The provider.
    Provider,
    /// The version.
    Version,
    /// The pair `read_only` and `destructive = true`.
    ReadOnlyAndDestructive,
    /// The scope at this index of [`Draft::scopes`].
    Scope(usize),
}

/// One broken rule, found in one part of a draft.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where it is.
    pub subject: Subject,
    /// What is wrong.
    pub violation: Violation,
}

/// A broken manifest rule. `Display` gives the message users read: lowercase, no trailing
/// period, and it says what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// The tool name is empty.
    NameEmpty,
    /// The tool name is longer than [`MAX_NAME_LEN`].
    NameTooLong {
        /// Its length in characters.
        len: usize,
    },
    /// The tool name has a character MCP does not allow.
    NameCharacter {
        /// The name.
        name: String,
        /// The first character that is not allowed.
        found: char,
    },
    /// The provider is empty, too long, or has a character outside `A-Z a-z 0-9 _ - .`.
    Provider {
        /// The provider as written.
        provider: String,
    },
    /// The version is empty, too long, or has white space.
    Version {
        /// The version as written.
        version: String,
    },
    /// `read_only` together with `destructive = true`.
    ReadOnlyAndDestructive,
    /// A scope is the empty string.
    ScopeEmpty,
    /// A scope contains white space.
    ScopeWhitespace {
        /// The scope as written.
        scope: String,
    },
    /// An agent name is empty, too long, or has a character outside `A-Z a-z 0-9 _ - .`.
    AgentName {
        /// The name.
        name: String,
    },
    /// A read-only tool requires a scope that grants a mutation.
    ReadOnlyMutatingScope {
        /// The scope as written.
        scope: String,
        /// The mutating verb found in its last segment.
        verb: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::NameEmpty => f.write_str(
                "a tool name cannot be empty; use 1 to 128 characters of `A-Z a-z 0-9 _ - .`",
            ),
            Violation::NameTooLong { len } => write!(
                f,
                "a tool name can have at most {MAX_NAME_LEN} characters, this one has {len}"
            ),
            Violation::NameCharacter { name, found } => write!(
                f,
                "tool name `{name}` contains {found:?}, which MCP does not allow in a tool name; \
                 use only `A-Z a-z 0-9 _ - .`"
            ),
            Violation::Provider { provider } => write!(
                f,
                "provider `{provider}` is not valid; use 1 to {MAX_LABEL_LEN} characters of \
                 `A-Z a-z 0-9 _ - .` (a provider names a group of tools in `provider/tool` patterns)"
            ),
            Violation::Version { version } => write!(
                f,
                "version `{version}` is not valid; use 1 to {MAX_LABEL_LEN} characters without white space"
            ),
            Violation::ReadOnlyAndDestructive => f.write_str(
                "a tool cannot be both `read_only` and `destructive = true`; \
                 remove one of the two (a read-only tool is never destructive)",
            ),
            Violation::AgentName { name } => write!(
                f,
                "agent name `{name}` is not valid; use 1 to {MAX_NAME_LEN} characters of `A-Z a-z 0-9 _ - .`"
            ),
            Violation::ScopeEmpty => f.write_str("a scope cannot be empty; remove it or name it"),
            Violation::ScopeWhitespace { scope } => write!(
                f,
                "scope {scope:?} contains white space; write each scope as one word such as `metrics:read`"
            ),
            Violation::ReadOnlyMutatingScope { scope, verb } => write!(
                f,
                "read-only tool requires scope `{scope}`, whose last segment `{verb}` grants a \
                 mutation; require a read scope, or drop `read_only` if the tool really mutates"
            ),
        }
    }
}

impl std::error::Error for Violation {}

/// Checks a tool name against the MCP rule: 1 to 128 characters of `A-Z a-z 0-9 _ - .`.
pub fn check_tool_name(name: &str) -> Result<(), Violation> {
    if name.is_empty() {
        return Err(Violation::NameEmpty);
    }
    let len = name.chars().count();
    if len > MAX_NAME_LEN {
        return Err(Violation::NameTooLong { len });
    }
    match name.chars().find(|c| !is_name_char(*c)) {
        Some(found) => Err(Violation::NameCharacter {
            name: name.to_owned(),
            found,
        }),
        None => Ok(()),
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Checks an agent name: the same alphabet and length as a tool name.
pub fn check_agent_name(name: &str) -> Result<(), Violation> {
    if check_tool_name(name).is_ok() {
        Ok(())
    } else {
        Err(Violation::AgentName {
            name: name.to_owned(),
        })
    }
}

/// Checks a provider name: 1 to 64 characters of `A-Z a-z 0-9 _ - .`.
pub fn check_provider(provider: &str) -> Result<(), Violation> {
    let ok = !provider.is_empty()
        && provider.chars().count() <= MAX_LABEL_LEN
        && provider.chars().all(is_name_char);
    if ok {
        Ok(())
    } else {
        Err(Violation::Provider {
            provider: provider.to_owned(),
        })
    }
}

/// Checks an explicit schema version: 1 to 64 characters without white space.
pub fn check_version(version: &str) -> Result<(), Violation> {
    let ok = !version.is_empty()
        && version.chars().count() <= MAX_LABEL_LEN
        && !version.chars().any(char::is_whitespace);
    if ok {
        Ok(())
    } else {
        Err(Violation::Version {
            version: version.to_owned(),
        })
    }
}

/// Checks the form of one scope: not empty, no white space.
pub fn check_scope(scope: &str) -> Result<(), Violation> {
    if scope.is_empty() {
        Err(Violation::ScopeEmpty)
    } else if scope.chars().any(char::is_whitespace) {
        Err(Violation::ScopeWhitespace {
            scope: scope.to_owned(),
        })
    } else {
        Ok(())
    }
}

/// The mutating verb that a scope grants, if its last segment (after `:`, `.` or `/`) is one of
/// [`MUTATING_VERBS`], compared without regard to case.
pub fn mutating_verb(scope: &str) -> Option<&'static str> {
    let last = scope.rsplit([':', '.', '/']).next().unwrap_or(scope);
    MUTATING_VERBS
        .iter()
        .copied()
        .find(|verb| verb.eq_ignore_ascii_case(last))
}

/// Applies every rule to a draft, and reports every problem, not only the first.
pub fn validate(draft: &Draft<'_>) -> Result<Validated, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut report = |subject, result: Result<(), Violation>| {
        if let Err(violation) = result {
            problems.push(Problem { subject, violation });
        }
    };
    report(Subject::Name, check_tool_name(draft.name));
    if let Some(provider) = draft.provider {
        report(Subject::Provider, check_provider(provider));
    }
    if let Some(version) = draft.version {
        report(Subject::Version, check_version(version));
    }
    let flags = Flags::resolve(
        draft.read_only,
        draft.destructive,
        draft.idempotent,
        draft.open_world,
    );
    if let Err(violation) = &flags {
        report(Subject::ReadOnlyAndDestructive, Err(violation.clone()));
    }
    for (index, scope) in draft.scopes.iter().enumerate() {
        let form = check_scope(scope);
        let checked = form.is_ok();
        report(Subject::Scope(index), form);
        if checked
            && draft.read_only == Some(true)
            && let Some(verb) = mutating_verb(scope)
        {
            report(
                Subject::Scope(index),
                Err(Violation::ReadOnlyMutatingScope {
                    scope: (*scope).to_owned(),
                    verb: verb.to_owned(),
                }),
            );
        }
    }
    match flags {
        Ok(flags) if problems.is_empty() => Ok(Validated {
            flags,
            scopes: normalize_scopes(draft.scopes.iter().copied()),
        }),
        _ => Err(problems),
    }
}

/// Sorts and de-duplicates scopes.
pub fn normalize_scopes<'a>(scopes: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut scopes: Vec<String> = scopes.into_iter().map(str::to_owned).collect();
    scopes.sort();
    scopes.dedup();
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_mcp_ones() {
        let flags = Flags::resolve(None, None, None, None).unwrap();
        assert_eq!(
            flags,
            Flags {
                read_only: false,
                destructive: true,
                idempotent: false,
                open_world: true
            }
        );
        let read = Flags::resolve(Some(true), None, None, None).unwrap();
        assert!(!read.destructive);
        assert_eq!(
            Flags::resolve(Some(true), Some(true), None, None),
            Err(Violation::ReadOnlyAndDestructive)
        );
    }

    #[test]
    fn names_follow_the_mcp_rule() {
        assert!(check_tool_name("prom.query-v2_x").is_ok());
        assert_eq!(check_tool_name(""), Err(Violation::NameEmpty));
        assert_eq!(
            check_tool_name(&"a".repeat(129)),
            Err(Violation::NameTooLong { len: 129 })
        );
        assert!(check_tool_name(&"a".repeat(128)).is_ok());
        assert!(matches!(
            check_tool_name("restart pod"),
            Err(Violation::NameCharacter { found: ' ', .. })
        ));
        assert!(matches!(
            check_tool_name("k8s/restart"),
            Err(Violation::NameCharacter { found: '/', .. })
        ));
    }

    #[test]
    fn mutating_verbs_are_found_in_the_last_segment() {
        assert_eq!(mutating_verb("k8s:write"), Some("write"));
        assert_eq!(mutating_verb("db.Delete"), Some("delete"));
        assert_eq!(mutating_verb("org/admin"), Some("admin"));
        assert_eq!(mutating_verb("ssh:exec"), Some("exec"));
        assert_eq!(mutating_verb("write:logs"), None);
        assert_eq!(mutating_verb("metrics:read"), None);
        assert_eq!(mutating_verb("writer"), None);
    }

    #[test]
    fn validate_reports_every_problem() {
        let draft = Draft {
            name: "bad name",
            provider: Some("k8s/x"),
            version: Some(""),
            read_only: Some(true),
            destructive: Some(true),
            scopes: vec!["", "a b", "k8s:write", "metrics:read"],
            ..Draft::default()
        };
        let problems = validate(&draft).unwrap_err();
        let subjects: Vec<Subject> = problems.iter().map(|p| p.subject).collect();
        assert_eq!(
            subjects,
            vec![
                Subject::Name,
                Subject::Provider,
                Subject::Version,
                Subject::ReadOnlyAndDestructive,
                Subject::Scope(0),
                Subject::Scope(1),
                Subject::Scope(2),
            ]
        );
    }

    #[test]
    fn validate_sorts_and_dedups_scopes() {
        let draft = Draft {
            name: "t",
            scopes: vec!["b:read", "a:read", "b:read"],
            ..Draft::default()
        };
        let ok = validate(&draft).unwrap();
        assert_eq!(ok.scopes, vec!["a:read", "b:read"]);
    }
}
