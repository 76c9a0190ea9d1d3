//! The compile-time advisor rule: what `#[advisor_agent]` asserts for every tool it binds.
//!
//! A proc macro cannot see other items, so `#[advisor_agent]` cannot know whether a tool it names
//! is read-only. The trait system links the two macros instead. For every bound tool `T` of an
//! advisor `A`, the attribute expands to
//!
//! ```text
//! bind_advisor_tool::<T, A, { <T as Capability>::READ_ONLY }>()
//! ```
//!
//! which compiles only when `T: AdvisorBindable<A, true>`, that is when `T` is a tool and its
//! `READ_ONLY` is `true`. Reading the constant first means a type that is not a tool fails on
//! [`Capability`] alone, with its own message, and a mutating tool fails here, with a message
//! naming the tool and the agent, at the tool's path inside the attribute. It is a trait bound,
//! not a comparison of names: a type alias or a tool from another crate is checked the same way.

use crate::manifest::{Capability, CapabilityManifest};

/// Implemented for a tool whose `READ_ONLY` is `true`, whatever the agent: the bound an advisor
/// agent `Agent` puts on each tool it binds.
#[diagnostic::on_unimplemented(
    message = "advisor agent `{Agent}` cannot bind `{Self}`, because `{Self}` is not a read-only tool",
    label = "`{Self}` may mutate state, and `{Agent}` is an advisor",
    note = "advisor agents (research, selection, analysis) bind only tools declared `#[capability(read_only)]`",
    note = "if `{Self}` truly never mutates, declare it `#[capability(read_only)]`; otherwise bind it to an `#[agent(...)]`, which may act"
)]
pub trait AdvisorBindable<Agent: ?Sized, const READ_ONLY: bool>: Capability {}

impl<T: ?Sized + Capability, A: ?Sized> AdvisorBindable<A, true> for T {}

/// The manifest of a tool that advisor `A` may bind; does not compile for any other tool. Called
/// by the code `#[advisor_agent]` generates (through `capability::__private`), not by hand.
pub const fn bind_advisor_tool<T, A, const READ_ONLY: bool>() -> fn() -> &'static CapabilityManifest
where
    T: ?Sized + AdvisorBindable<A, READ_ONLY>,
    A: ?Sized,
{
    T::manifest
}
