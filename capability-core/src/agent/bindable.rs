//! The compile-time advisor rule: what `#[advisor_agent]` asserts for every tool it binds, and
//! the proofs it leaves behind.
//!
//! A proc macro cannot see other items, so `#[advisor_agent]` cannot know whether a tool it names
//! is read-only. The trait system links the two macros instead. For every bound tool `T` of an
//! advisor `A`, the attribute expands to
//!
//! ```text
//! pub struct Token(Seal);   // both declared in the expansion's own block
//! struct Seal;
//! impl AdvisorTokens for A { type Token = Token; }
//! impl AdvisorBound<A> for T {
//!     const BINDING: AdvisorBinding<T, A> =
//!         bind_advisor_tool::<T, A, { <T as Capability>::READ_ONLY }>(&Token(Seal));
//! }
//! static TOOLS: [AdvisorTool; N] = [<T as AdvisorBound<A>>::BINDING.tool(), ...];
//! ```
//!
//! which compiles only when `T: AdvisorBindable<A, true>`, that is when `T` is a tool and its
//! `READ_ONLY` is `true`. Reading the constant first means a type that is not a tool fails on
//! [`Capability`] alone, with its own message, and a mutating tool fails here, with a message
//! naming the tool and the agent, at the tool's path inside the attribute. It is a trait bound,
//! not a comparison of names: a type alias or a tool from another crate is checked the same way.
//!
//! Nothing here can be imitated in safe code:
//! - [`AdvisorBindable`] is sealed: implementing it (`impl AdvisorBindable<Analyst, false> for
//!   RestartPod {}`) fails, because its supertrait cannot be named outside this crate.
//! - [`AdvisorBinding`] and [`AdvisorTool`] have private fields: only [`bind_advisor_tool`]
//!   creates them, and it refuses (in const evaluation) a tool whose `READ_ONLY` is `false`,
//!   whatever `READ_ONLY` argument it is given. A derived advisor's tool list is made of
//!   `AdvisorTool`s, so a `crate = ".."` path that points at an imitation of the facade cannot
//!   build an advisor from anything else.
//! - [`AdvisorBound<A>`] is the only proof that advisor `A` binds a tool, and
//!   `AdvisorSession::run` (in `capability::gate`) requires it. Its constant can only be made by
//!   `bind_advisor_tool`, which takes `A`'s binding token ([`AdvisorTokens`]): a value only
//!   `A`'s attribute can make, so a hand-written impl, for a mutating tool or a read-only tool
//!   the attribute does not list, does not build. The attribute emits one impl per bound tool,
//!   so one tool bound twice (through any two paths) is a conflicting implementation.

use std::fmt;
use std::marker::PhantomData;

use crate::agent::Agent;
use crate::manifest::{Capability, CapabilityManifest};

mod sealed {
    use crate::manifest::Capability;

    /// The seal of `AdvisorBindable`: it cannot be named outside this crate, so it cannot be
    /// implemented there, and neither can `AdvisorBindable`.
    #[diagnostic::on_unimplemented(
        message = "`AdvisorBindable` is sealed: it cannot be implemented outside the capability library",
        label = "`{Self}` is not bindable by an advisor here",
        note = "advisor agents bind only tools declared `#[capability(read_only)]`; the library implements `AdvisorBindable` for exactly those"
    )]
    pub trait Sealed<Agent: ?Sized, const READ_ONLY: bool> {}

    impl<T: ?Sized + Capability, A: ?Sized> Sealed<A, true> for T {}
}

/// Implemented for a tool whose `READ_ONLY` is `true`, whatever the agent: the bound an advisor
/// agent `Agent` puts on each tool it binds. Sealed: only this library implements it.
#[diagnostic::on_unimplemented(
    message = "advisor agent `{Agent}` cannot bind `{Self}`, because `{Self}` is not a read-only tool",
    label = "`{Self}` may mutate state, and `{Agent}` is an advisor",
    note = "advisor agents (research, selection, analysis) bind only read-only tools: `#[capability(read_only)]`, or `annotations(read_only_hint = true)` on an rmcp `#[tool]`",
    note = "if `{Self}` truly never mutates, declare it read-only; otherwise bind it to an `#[agent(...)]`, which may act"
)]
pub trait AdvisorBindable<Agent: ?Sized, const READ_ONLY: bool>:
    Capability + sealed::Sealed<Agent, READ_ONLY>
{
}

impl<T: ?Sized + Capability, A: ?Sized> AdvisorBindable<A, true> for T {}

/// Proof that advisor `A` binds the read-only tool `T`. Only [`bind_advisor_tool`] creates one.
pub struct AdvisorBinding<T: ?Sized, A: ?Sized> {
    manifest: fn() -> &'static CapabilityManifest,
    tool: PhantomData<fn() -> *const T>,
    agent: PhantomData<fn() -> *const A>,
}

impl<T: ?Sized, A: ?Sized> AdvisorBinding<T, A> {
    /// The bound tool, for the advisor's tool list.
    pub const fn tool(&self) -> AdvisorTool {
        AdvisorTool {
            manifest: self.manifest,
        }
    }
}

impl<T: ?Sized, A: ?Sized> fmt::Debug for AdvisorBinding<T, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdvisorBinding")
            .field("tool", &std::any::type_name::<T>())
            .field("agent", &std::any::type_name::<A>())
            .finish()
    }
}

/// One tool of an advisor's tool list, proven read-only at compile time by
/// [`bind_advisor_tool`]; nothing else creates one.
#[derive(Clone, Copy)]
pub struct AdvisorTool {
    manifest: fn() -> &'static CapabilityManifest,
}

impl AdvisorTool {
    /// The tool's manifest.
    pub fn manifest(&self) -> &'static CapabilityManifest {
        (self.manifest)()
    }
}

impl fmt::Debug for AdvisorTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AdvisorTool")
            .field(&self.manifest().qualified_name())
            .finish()
    }
}

/// One tool of an operator's tool list (any tool: operators may act).
#[derive(Clone, Copy)]
pub struct OperatorTool {
    manifest: fn() -> &'static CapabilityManifest,
}

impl OperatorTool {
    /// The tool's manifest.
    pub fn manifest(&self) -> &'static CapabilityManifest {
        (self.manifest)()
    }
}

impl fmt::Debug for OperatorTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OperatorTool")
            .field(&self.manifest().qualified_name())
            .finish()
    }
}

/// The proof that advisor `A` binds tool `Self`, emitted by `#[advisor_agent]` once per bound
/// tool; `AdvisorSession::run` (in `capability::gate`) requires it.
///
/// Its constant is made only by the library's [`bind_advisor_tool`], which refuses a tool that
/// is not read-only. One tool bound twice by one advisor, through any paths, is two
/// implementations of the same trait: a compile error. (It is implemented for the tool, not the
/// agent, so that rustc never guesses the tool from the agent's only binding.)
#[diagnostic::on_unimplemented(
    message = "advisor agent `{A}` does not bind `{Self}`",
    label = "`{A}` cannot run `{Self}`",
    note = "an advisor runs only the read-only tools its attribute binds: add `{Self}` to `#[advisor_agent(tools(...))]` on `{A}`"
)]
pub trait AdvisorBound<A: ?Sized + Agent> {
    /// The proof, made by [`bind_advisor_tool`].
    #[doc(hidden)]
    const BINDING: AdvisorBinding<Self, A>;
}

/// Operator `A` binds tool `Self`: emitted by `#[agent]` once per bound tool, so one tool bound
/// twice (through any paths) does not compile. Operators may bind any tool, so there is nothing
/// to prove.
#[diagnostic::on_unimplemented(
    message = "agent `{A}` does not bind `{Self}`",
    note = "add `{Self}` to `#[agent(tools(...))]` on `{A}`"
)]
pub trait OperatorBound<A: ?Sized + Agent> {}

/// The token of an advisor's bindings: a type `#[advisor_agent]` declares inside its own
/// expansion, whose one field has a type declared there too, so that no path outside the
/// expansion reaches it: a token can be named from outside (`<A as AdvisorTokens>::Token`)
/// but not made. [`bind_advisor_tool`] takes one, so the proof that `A` binds a tool
/// ([`AdvisorBound`]) can be made only by `A`'s attribute, for the tools it lists. Implemented
/// by the attribute; a second impl for the same agent conflicts.
#[doc(hidden)]
pub trait AdvisorTokens: Agent {
    /// The token type, declared in the attribute's expansion.
    type Token: 'static;
}

/// The proof that advisor `A` may bind `T`; does not compile for any other tool. Called by the
/// code `#[advisor_agent]` generates (through `capability::__private`), not by hand: it takes
/// the agent's binding token, which only that code can make.
///
/// The bound checks `READ_ONLY` at the type level, for the message; the body checks the tool's
/// own `READ_ONLY` again, so a caller that passes `true` for a mutating tool fails in const
/// evaluation (in a `static`, when the crate is checked; elsewhere, when it is built).
pub const fn bind_advisor_tool<T, A, const READ_ONLY: bool>(
    _token: &A::Token,
) -> AdvisorBinding<T, A>
where
    T: ?Sized + AdvisorBindable<A, READ_ONLY>,
    A: ?Sized + AdvisorTokens,
{
    if !T::READ_ONLY {
        panic!(
            "an advisor agent cannot bind a tool whose `Capability::READ_ONLY` is `false`: \
             the tool is not read-only (a `READ_ONLY` argument of `true` does not make it one)"
        );
    }
    AdvisorBinding {
        manifest: T::manifest,
        tool: PhantomData,
        agent: PhantomData,
    }
}

/// An operator's tool: any tool. Called by the code `#[agent]` generates.
pub const fn bind_tool<T: ?Sized + Capability>() -> OperatorTool {
    OperatorTool {
        manifest: T::manifest,
    }
}
