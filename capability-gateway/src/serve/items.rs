//! Resources and prompts across the fleet: one listing of each, every read and get routed to
//! its server.
//!
//! - **Prompts** are shown as tools are, under their server's prefix (`<prefix><name>`), and
//!   decided on the server's own name (`server/prompt` patterns). A shown name two prompts would
//!   share (of two servers, or twice on one) is withheld from everyone and reported.
//! - **Resources keep their URIs**: a URI is the resource's identity, and tool results link to
//!   resources by it, so it is not rewritten; the resource's `name` is shown under the prefix.
//!   A read goes to the one server that serves the URI: lists it, or has a template that matches
//!   it. A URI two servers serve (one lists it and another's template matches it, say) is
//!   withheld from the listing and its read refused, and a listed one is reported: which server
//!   answers must never depend on order. Each read is decided on `server/URI` for the server it
//!   goes to.
//! - Subscriptions (`resources/subscribe`) and completion are not served across servers (not
//!   advertised).

use std::collections::{BTreeMap, BTreeSet};

use ::rmcp::model::{Prompt, Resource, ResourceTemplate};

pub(crate) use crate::upstream::Listed;

/// One server's items under its prefix.
#[derive(Clone, Debug)]
struct Member {
    server: String,
    prefix: String,
    listed: Listed,
}

impl Member {
    fn serves_by_template(&self, uri: &str) -> bool {
        self.listed
            .templates
            .iter()
            .any(|t| template_matches(&t.uri_template, uri))
    }
}

/// An item as shown, with its server and its own name there.
#[derive(Clone, Debug)]
pub(crate) struct Shown<'a, T> {
    pub(crate) server: &'a str,
    pub(crate) own: &'a str,
    pub(crate) item: T,
}

/// The items of a list as shown.
pub(crate) fn shown<T>(list: Vec<Shown<'_, T>>) -> Vec<T> {
    list.into_iter().map(|s| s.item).collect()
}

/// Where a resource read goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum UriRoute<'a> {
    /// The one server that lists it, or (when none does) the one whose template matches it.
    Server(&'a str),
    /// Several servers list it, or several templates match it: refused.
    Shared(Vec<&'a str>),
    /// No server lists it, no template matches it: refused.
    Unknown,
}

/// A shown prompt name, or a URI, that several servers claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ItemCollision {
    /// `prompt` or `resource`.
    pub(crate) kind: &'static str,
    /// The shown prompt name, or the URI.
    pub(crate) shown: String,
    /// Who claims it (`server/prompt`, or the servers).
    pub(crate) by: Vec<String>,
}

/// The fleet's resources and prompts (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct Items {
    members: Vec<Member>,
    /// Shown prompt name → (member, the prompt's own name); only names one prompt claims.
    prompts: BTreeMap<String, (usize, String)>,
    /// Listed URI → the members that serve it (list it, or have a template that matches it).
    uris: BTreeMap<String, Vec<usize>>,
    collisions: Vec<ItemCollision>,
}

impl Items {
    /// The items of each server (`server`, `prefix`, what it lists), in server order.
    pub(crate) fn new(members: impl IntoIterator<Item = (String, String, Listed)>) -> Items {
        let members: Vec<Member> = members
            .into_iter()
            .map(|(server, prefix, listed)| Member {
                server,
                prefix,
                listed,
            })
            .collect();
        let mut claimed: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
        let mut uris: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, member) in members.iter().enumerate() {
            for prompt in &member.listed.prompts {
                claimed
                    .entry(format!("{}{}", member.prefix, prompt.name))
                    .or_default()
                    .push((i, prompt.name.clone()));
            }
            for resource in &member.listed.resources {
                uris.entry(resource.uri.clone()).or_default();
            }
        }
        // Who serves each listed URI: the servers that list it, and those with a template that
        // matches it.
        let listed: Vec<BTreeSet<&str>> = members
            .iter()
            .map(|m| m.listed.resources.iter().map(|r| r.uri.as_str()).collect())
            .collect();
        for (uri, servers) in &mut uris {
            for (i, member) in members.iter().enumerate() {
                if listed[i].contains(uri.as_str()) || member.serves_by_template(uri) {
                    servers.push(i);
                }
            }
        }
        let mut collisions = Vec::new();
        let mut prompts = BTreeMap::new();
        for (shown, mut claims) in claimed {
            if claims.len() == 1 {
                if let Some(claim) = claims.pop() {
                    prompts.insert(shown, claim);
                }
                continue;
            }
            collisions.push(ItemCollision {
                kind: "prompt",
                shown,
                by: claims
                    .iter()
                    .map(|(i, name)| format!("{}/{name}", members[*i].server))
                    .collect(),
            });
        }
        for (uri, servers) in &uris {
            if servers.len() > 1 {
                collisions.push(ItemCollision {
                    kind: "resource",
                    shown: uri.clone(),
                    by: servers.iter().map(|i| members[*i].server.clone()).collect(),
                });
            }
        }
        Items {
            members,
            prompts,
            uris,
            collisions,
        }
    }

    /// The prompt names and URIs several servers claim (each withheld from everyone).
    pub(crate) fn collisions(&self) -> &[ItemCollision] {
        &self.collisions
    }

    /// The shown name of `member`'s `prompt`, unless it is withheld.
    fn shown_prompt(&self, member: usize, prompt: &Prompt) -> Option<String> {
        let shown = format!("{}{}", self.members[member].prefix, prompt.name);
        self.prompts
            .get(&shown)
            .is_some_and(|(m, _)| *m == member)
            .then_some(shown)
    }

    /// Every prompt `may` lets through (`server`, the prompt's own name), under its shown name,
    /// with its server and own name; withheld names left out.
    pub(crate) fn prompts(&self, may: impl Fn(&str, &str) -> bool) -> Vec<Shown<'_, Prompt>> {
        let mut shown = Vec::new();
        for (i, member) in self.members.iter().enumerate() {
            for prompt in &member.listed.prompts {
                if let Some(name) = self.shown_prompt(i, prompt)
                    && may(&member.server, &prompt.name)
                {
                    let mut shown_prompt = prompt.clone();
                    shown_prompt.name = name;
                    shown.push(Shown {
                        server: &member.server,
                        own: &prompt.name,
                        item: shown_prompt,
                    });
                }
            }
        }
        shown
    }

    /// The server and own name of the prompt shown as `shown` (`None`: no prompt, or a withheld
    /// name).
    pub(crate) fn prompt(&self, shown: &str) -> Option<(&str, &str)> {
        self.prompts
            .get(shown)
            .map(|(i, name)| (self.members[*i].server.as_str(), name.as_str()))
    }

    /// The servers that claim the shown prompt name `shown` when it is withheld.
    pub(crate) fn prompt_claimed_by(&self, shown: &str) -> Option<&[String]> {
        self.collisions
            .iter()
            .find(|c| c.kind == "prompt" && c.shown == shown)
            .map(|c| c.by.as_slice())
    }

    /// Every resource `may` lets through (`server`, URI), its name under the server's prefix;
    /// URIs several servers serve left out.
    pub(crate) fn resources(&self, may: impl Fn(&str, &str) -> bool) -> Vec<Shown<'_, Resource>> {
        let mut shown = Vec::new();
        for (i, member) in self.members.iter().enumerate() {
            for resource in &member.listed.resources {
                let only_here = self
                    .uris
                    .get(&resource.uri)
                    .is_some_and(|servers| servers == &[i]);
                if only_here && may(&member.server, &resource.uri) {
                    let mut item = resource.clone();
                    item.name = format!("{}{}", member.prefix, resource.name);
                    shown.push(Shown {
                        server: &member.server,
                        own: &resource.name,
                        item,
                    });
                }
            }
        }
        shown
    }

    /// Every template `may` lets through (`server`, the URI template as written), its name under
    /// the server's prefix.
    pub(crate) fn templates(
        &self,
        may: impl Fn(&str, &str) -> bool,
    ) -> Vec<Shown<'_, ResourceTemplate>> {
        let mut shown = Vec::new();
        for member in &self.members {
            for template in &member.listed.templates {
                if may(&member.server, &template.uri_template) {
                    let mut item = template.clone();
                    item.name = format!("{}{}", member.prefix, template.name);
                    shown.push(Shown {
                        server: &member.server,
                        own: &template.name,
                        item,
                    });
                }
            }
        }
        shown
    }

    /// How many resources, templates and prompts the servers list, all told.
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        self.members.iter().fold((0, 0, 0), |(r, t, p), m| {
            (
                r + m.listed.resources.len(),
                t + m.listed.templates.len(),
                p + m.listed.prompts.len(),
            )
        })
    }

    /// Where a read of `uri` goes (see the module docs).
    /// The server that lists the URI template `template` as written (a completion's
    /// reference names a template so).
    pub(crate) fn template_route(&self, template: &str) -> UriRoute<'_> {
        let servers: Vec<&str> = self
            .members
            .iter()
            .filter(|m| {
                m.listed
                    .templates
                    .iter()
                    .any(|t| t.uri_template == template)
            })
            .map(|m| m.server.as_str())
            .collect();
        match (servers.as_slice(), self.members.as_slice()) {
            // One server serves resources: a URI it does not list goes to it, as to a proxy's
            // one server (no other could answer, so nothing depends on order), and is decided
            // in its resolved form.
            ([], [only]) => UriRoute::Server(only.server.as_str()),
            ([], _) => UriRoute::Unknown,
            ([one], _) => UriRoute::Server(one),
            _ => UriRoute::Shared(servers),
        }
    }

    pub(crate) fn route(&self, uri: &str) -> UriRoute<'_> {
        let servers: Vec<&str> = match self.uris.get(uri) {
            Some(servers) => servers
                .iter()
                .map(|i| self.members[*i].server.as_str())
                .collect(),
            None => self
                .members
                .iter()
                .filter(|m| m.serves_by_template(uri))
                .map(|m| m.server.as_str())
                .collect(),
        };
        match (servers.as_slice(), self.members.as_slice()) {
            // One server serves resources: a URI it does not list goes to it, as to a proxy's
            // one server (no other could answer, so nothing depends on order), and is decided
            // in its resolved form.
            ([], [only]) => UriRoute::Server(only.server.as_str()),
            ([], _) => UriRoute::Unknown,
            ([one], _) => UriRoute::Server(one),
            _ => UriRoute::Shared(servers),
        }
    }
}

/// Whether `uri` is an expansion of the URI template `template` (RFC 6570), for routing only
/// (the decision is made on the URI itself): the literal parts must match exactly; a simple
/// expression (`{id}`) stands for a run of characters without `/`, `?` or `#` (which its
/// expansion would have escaped), an expression with an operator (`{+path}`, `{/a,b}`,
/// `{?q}`, ...) for any run. A template with an unclosed `{` matches nothing.
pub(crate) fn template_matches(template: &str, uri: &str) -> bool {
    enum Part<'a> {
        Literal(&'a str),
        Simple,
        Any,
    }
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        let expression = &rest[open + 1..open + close];
        parts.push(match expression.chars().next() {
            Some('+' | '#' | '/' | '.' | ';' | '?' | '&') => Part::Any,
            _ => Part::Simple,
        });
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    // Backtracking over the parts; templates are short, so the cost is small.
    fn matches(parts: &[Part<'_>], text: &str) -> bool {
        let Some((first, others)) = parts.split_first() else {
            return text.is_empty();
        };
        match first {
            Part::Literal(literal) => text
                .strip_prefix(literal)
                .is_some_and(|rest| matches(others, rest)),
            Part::Simple | Part::Any => {
                let simple = matches!(first, Part::Simple);
                let mut ends: Vec<usize> = vec![0];
                for (i, c) in text.char_indices() {
                    if simple && matches!(c, '/' | '?' | '#') {
                        break;
                    }
                    ends.push(i + c.len_utf8());
                }
                ends.into_iter()
                    .rev()
                    .any(|end| matches(others, &text[end..]))
            }
        }
    }
    matches(&parts, uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(resources: &[&str], templates: &[&str], prompts: &[&str]) -> Listed {
        Listed {
            resources: resources
                .iter()
                .map(|uri| Resource::new(*uri, format!("r{}", uri.len())))
                .collect(),
            templates: templates
                .iter()
                .map(|t| ResourceTemplate::new(*t, "t"))
                .collect(),
            prompts: prompts
                .iter()
                .map(|p| Prompt::new(*p, None::<String>, None))
                .collect(),
        }
    }

    fn fleet() -> Items {
        Items::new([
            (
                "a".to_owned(),
                "a_".to_owned(),
                listed(
                    &["notes://1", "shared://x", "docs://listed"],
                    &["notes://{id}"],
                    &["greet", "x"],
                ),
            ),
            (
                "b".to_owned(),
                String::new(),
                listed(
                    &["shared://x", "b://only"],
                    &["docs://{+path}", "notes://{id}/raw"],
                    &["a_x", "plain"],
                ),
            ),
        ])
    }

    #[test]
    fn prompts_are_shown_under_their_prefix_and_a_shared_name_is_withheld_from_both() {
        let items = fleet();
        let names: Vec<String> = items
            .prompts(|_, _| true)
            .into_iter()
            .map(|p| p.item.name)
            .collect();
        assert_eq!(names, ["a_greet", "plain"]);
        assert_eq!(items.prompt("a_greet"), Some(("a", "greet")));
        assert_eq!(items.prompt("plain"), Some(("b", "plain")));
        assert_eq!(items.prompt("a_x"), None, "a/x and b/a_x share it");
        assert_eq!(
            items.prompt_claimed_by("a_x"),
            Some(&["a/x".to_owned(), "b/a_x".to_owned()][..])
        );
        assert_eq!(items.prompt("greet"), None, "only the shown name routes");
        let only_a: Vec<(&str, &str, String)> = items
            .prompts(|server, name| server == "a" && name == "greet")
            .into_iter()
            .map(|p| (p.server, p.own, p.item.name))
            .collect();
        assert_eq!(
            only_a,
            [("a", "greet", "a_greet".to_owned())],
            "decided on the server's own names"
        );
    }

    #[test]
    fn a_read_goes_to_the_one_server_that_lists_or_matches_it() {
        let items = fleet();
        assert_eq!(items.route("notes://1"), UriRoute::Server("a"));
        assert_eq!(items.route("b://only"), UriRoute::Server("b"));
        assert_eq!(items.route("shared://x"), UriRoute::Shared(vec!["a", "b"]));
        assert_eq!(
            items.route("notes://7"),
            UriRoute::Server("a"),
            "a's template"
        );
        assert_eq!(
            items.route("docs://listed"),
            UriRoute::Shared(vec!["a", "b"]),
            "a lists it, b's template matches it"
        );
        assert_eq!(
            items.route("notes://7/raw"),
            UriRoute::Server("b"),
            "a simple expression does not take a `/`"
        );
        assert_eq!(items.route("docs://a/b/c"), UriRoute::Server("b"));
        assert_eq!(items.route("other://1"), UriRoute::Unknown);
        let uris: Vec<String> = shown(items.resources(|_, _| true))
            .into_iter()
            .map(|r| r.uri)
            .collect();
        assert_eq!(
            uris,
            ["notes://1", "b://only"],
            "the shared URI is withheld"
        );
        let kinds: Vec<(&str, &str)> = items
            .collisions()
            .iter()
            .map(|c| (c.kind, c.shown.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("prompt", "a_x"),
                ("resource", "docs://listed"),
                ("resource", "shared://x")
            ]
        );
    }

    #[test]
    fn two_servers_whose_templates_match_an_unlisted_uri_are_both_refused() {
        let items = Items::new([
            (
                "a".to_owned(),
                String::new(),
                listed(&[], &["x://{id}"], &[]),
            ),
            (
                "b".to_owned(),
                String::new(),
                listed(&[], &["x://{+any}"], &[]),
            ),
        ]);
        assert_eq!(items.route("x://1"), UriRoute::Shared(vec!["a", "b"]));
        assert_eq!(items.route("x://1/2"), UriRoute::Server("b"));
    }

    #[test]
    fn template_matching_takes_literals_exactly() {
        assert!(template_matches("demo://text/{id}", "demo://text/12"));
        assert!(!template_matches("demo://text/{id}", "demo://blob/12"));
        assert!(!template_matches("demo://text/{id}", "demo://text/1/2"));
        assert!(template_matches("demo://text/{id}", "demo://text/"));
        assert!(template_matches("f://{a}-{b}.txt", "f://x-y-z.txt"));
        assert!(template_matches("s://q{?x,y}", "s://q?x=1&y=2"));
        assert!(!template_matches("s://{id", "s://1"), "unclosed");
        assert!(template_matches("plain://1", "plain://1"));
        assert!(!template_matches("plain://1", "plain://12"));
    }
}
