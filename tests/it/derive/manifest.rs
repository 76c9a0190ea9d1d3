//! Manifests as the derive builds them: defaults, every key, the descriptor hash, serde.

use capability::{Capability, CapabilityManifest, ReadOnlyTool};

/// Run a PromQL query.
#[derive(Capability)]
#[capability(read_only, idempotent, open_world = false, scopes = ["metrics:read"])]
struct PromQuery {
    #[allow(dead_code)]
    query: String,
}

/// Restart a pod.
///
/// The pod is deleted and its controller starts a new one.
#[derive(Capability)]
#[capability(destructive, scopes = ["k8s:write"], provider = "k8s")]
struct RestartPod {
    #[allow(dead_code)]
    name: String,
}

#[derive(Capability)]
struct SaysNothing;

#[derive(Capability)]
#[capability(read_only)]
struct ReadOnlyDefaults;

#[derive(Capability)]
#[capability(
    read_only = false,
    destructive = false,
    idempotent = false,
    open_world = true
)]
struct ExplicitFalse;

#[allow(dead_code)]
#[derive(Capability)]
struct Fetch<T: Clone> {
    id: Vec<T>,
    by: &'static str,
}

fn is_hex64(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[test]
fn the_contract_example_has_the_declared_manifest() {
    let m = PromQuery::manifest();
    assert_eq!(m.name(), "prom_query");
    assert_eq!(m.title(), None);
    assert_eq!(m.description(), Some("Run a PromQL query."));
    assert_eq!(m.provider(), None);
    assert!(m.read_only());
    assert!(!m.destructive(), "a read-only tool is never destructive");
    assert!(m.idempotent());
    assert!(!m.open_world());
    assert_eq!(m.required_scopes(), ["metrics:read"]);
    assert_eq!(m.input_schema_id(), "it::derive::manifest::PromQuery");
    assert_eq!(m.output_schema_id(), None);
    assert!(is_hex64(m.descriptor_hash()));
    assert_eq!(m.schema_version(), &m.descriptor_hash()[..12]);

    let m = RestartPod::manifest();
    assert_eq!(m.name(), "restart_pod");
    assert_eq!(m.provider(), Some("k8s"));
    assert!(!m.read_only() && m.destructive() && !m.idempotent() && m.open_world());
    assert_eq!(m.required_scopes(), ["k8s:write"]);
    assert_eq!(
        m.description(),
        Some("Restart a pod.\n\nThe pod is deleted and its controller starts a new one.")
    );
}

#[test]
fn defaults_are_the_mcp_defaults_and_fail_closed() {
    let m = SaysNothing::manifest();
    assert!(!m.read_only(), "readOnlyHint defaults to false");
    assert!(m.destructive(), "destructiveHint defaults to true");
    assert!(!m.idempotent(), "idempotentHint defaults to false");
    assert!(m.open_world(), "openWorldHint defaults to true");
    const { assert!(!<SaysNothing as Capability>::READ_ONLY) };
    assert_eq!(m.description(), None);
    assert!(m.required_scopes().is_empty());

    let m = ReadOnlyDefaults::manifest();
    assert!(m.read_only() && !m.destructive() && !m.idempotent() && m.open_world());
    const { assert!(<ReadOnlyDefaults as Capability>::READ_ONLY) };

    let m = ExplicitFalse::manifest();
    assert!(!m.read_only() && !m.destructive() && !m.idempotent() && m.open_world());
}

#[test]
fn each_hint_records_where_it_came_from() {
    use capability::manifest::{HintKind, HintSource};
    let m = PromQuery::manifest();
    let source = |kind| m.hint(kind).source();
    assert_eq!(source(HintKind::ReadOnly), HintSource::Declared);
    assert_eq!(source(HintKind::Idempotent), HintSource::Declared);
    assert_eq!(source(HintKind::OpenWorld), HintSource::Declared);
    assert_eq!(m.hint(HintKind::OpenWorld).stated(), Some(false));
    assert_eq!(source(HintKind::Destructive), HintSource::Defaulted);
    assert_eq!(m.hint(HintKind::Destructive).stated(), None);
    for kind in HintKind::ALL {
        assert_eq!(
            SaysNothing::manifest().hint(kind).source(),
            HintSource::Defaulted
        );
    }
}

#[test]
fn read_only_tool_trait_follows_the_flag() {
    fn read_only<T: ReadOnlyTool>() -> &'static CapabilityManifest {
        T::manifest()
    }
    assert!(read_only::<PromQuery>().read_only());
    assert!(read_only::<ReadOnlyDefaults>().read_only());
}

#[test]
fn manifest_is_built_once_and_shared_by_generic_instantiations() {
    assert!(std::ptr::eq(PromQuery::manifest(), PromQuery::manifest()));
    assert!(std::ptr::eq(
        Fetch::<u8>::manifest(),
        Fetch::<String>::manifest()
    ));
}

/// Known answers: the hash is SHA-256 of the canonical descriptor documented in
/// `capability-rules/src/descriptor.rs`, computed here independently (with Python's hashlib) so
/// that an accidental change of the format shows up as a failing test.
#[test]
fn descriptor_hash_known_answers() {
    // {"description":"Run a PromQL query.","destructive":false,"generics":"","idempotent":true,
    //  "input":{"fields":[["query","String"]],"kind":"named"},"name":"prom_query",
    //  "open_world":false,"output":null,"provider":null,"read_only":true,
    //  "scopes":["metrics:read"],"title":null,"version":null}
    assert_eq!(
        PromQuery::manifest().descriptor_hash(),
        "a751a085331b61991298b404e03a9fbad63f9e9922f24deeba539aeae5933069"
    );
    // {"description":null,"destructive":true,"generics":"<T:Clone>","idempotent":false,
    //  "input":{"fields":[["id","Vec<T>"],["by","&'static str"]],"kind":"named"},"name":"fetch",
    //  "open_world":true,"output":null,"provider":null,"read_only":false,"scopes":[],
    //  "title":null,"version":null}
    assert_eq!(
        Fetch::<u8>::manifest().descriptor_hash(),
        "eaf364aa6642aa4d1d7d79574c96e36ea1487bbbb2b25d996d49a0f1b789ba9f"
    );
}

#[test]
fn serde_round_trip_keeps_every_field_and_believes_no_hint() {
    use capability::manifest::{HintKind, HintSource};
    for m in [
        PromQuery::manifest(),
        RestartPod::manifest(),
        SaysNothing::manifest(),
        Fetch::<u8>::manifest(),
    ] {
        let json = serde_json::to_string(m).expect("a manifest serializes");
        let back: CapabilityManifest = serde_json::from_str(&json).expect("and deserializes");
        assert_eq!(back.name(), m.name());
        assert_eq!(back.title(), m.title());
        assert_eq!(back.description(), m.description());
        assert_eq!(back.provider(), m.provider());
        assert_eq!(back.required_scopes(), m.required_scopes());
        assert_eq!(back.input_schema_id(), m.input_schema_id());
        assert_eq!(back.output_schema_id(), m.output_schema_id());
        assert_eq!(back.schema_version(), m.schema_version());
        assert_eq!(back.descriptor_hash(), m.descriptor_hash());
        for kind in HintKind::ALL {
            let (was, is) = (m.hint(kind), back.hint(kind));
            assert_eq!(
                is.stated(),
                was.stated(),
                "{kind:?}: what was stated is kept"
            );
            let expected = match was.stated() {
                Some(_) => HintSource::UntrustedClaim,
                None => HintSource::Defaulted,
            };
            assert_eq!(is.source(), expected, "{kind:?}: read back as a claim");
        }
        assert!(!back.read_only(), "nothing read from a file is believed");
        assert!(back.destructive() && back.open_world() && !back.idempotent());

        // Once read, a manifest round-trips exactly: there is nothing left to downgrade.
        let again = serde_json::to_string(&back).expect("serializes again");
        let back_again: CapabilityManifest = serde_json::from_str(&again).expect("deserializes");
        assert_eq!(back_again, back);
        assert_eq!(
            serde_json::to_string(&back_again).expect("serializes"),
            again
        );
    }
}

#[test]
fn serialized_form_uses_the_getter_names() {
    let value = serde_json::to_value(PromQuery::manifest()).expect("serializes");
    let keys: Vec<&str> = value
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "name",
        "title",
        "description",
        "provider",
        "read_only",
        "destructive",
        "idempotent",
        "open_world",
        "required_scopes",
        "input_schema_id",
        "output_schema_id",
        "schema_version",
        "descriptor_hash",
    ] {
        assert!(keys.contains(&key), "missing {key} in {keys:?}");
    }
    assert_eq!(keys.len(), 13);
}

fn tampered(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut value = serde_json::to_value(PromQuery::manifest()).expect("serializes");
    edit(&mut value);
    match serde_json::from_value::<CapabilityManifest>(value) {
        Ok(m) => panic!("accepted a tampered manifest: {m:?}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn deserializing_refuses_a_manifest_that_breaks_the_rules() {
    let error = tampered(|v| v["name"] = "prom query".into());
    assert!(error.contains("tool name `prom query`"), "{error}");

    let error = tampered(|v| v["provider"] = "k8s cluster".into());
    assert!(error.contains("provider"), "{error}");

    let error = tampered(|v| v["required_scopes"] = serde_json::json!(["b:read", "a:read"]));
    assert!(error.contains("sorted"), "{error}");

    let error = tampered(|v| v["required_scopes"] = serde_json::json!(["a:read", "a:read"]));
    assert!(error.contains("sorted and free of repeats"), "{error}");

    let error = tampered(|v| v["required_scopes"] = serde_json::json!(["a read"]));
    assert!(error.contains("white space"), "{error}");

    let error = tampered(|v| v["descriptor_hash"] = "ABC".into());
    assert!(error.contains("64 lowercase hex digits"), "{error}");

    let error = tampered(|v| v["schema_version"] = "".into());
    assert!(error.contains("version"), "{error}");

    let error = tampered(|v| v["input_schema_id"] = "".into());
    assert!(error.contains("input_schema_id"), "{error}");

    let error = tampered(|v| v["extra"] = 1.into());
    assert!(error.contains("unknown field `extra`"), "{error}");

    let error = tampered(|v| v["read_only"]["source"] = "the_vendor".into());
    assert!(error.contains("unknown variant `the_vendor`"), "{error}");

    let error = tampered(|v| v["read_only"]["stated"] = "yes".into());
    assert!(error.contains("invalid type"), "{error}");

    let error = tampered(|v| {
        v.as_object_mut().expect("object").remove("read_only");
    });
    assert!(error.contains("missing field `read_only`"), "{error}");
}

#[test]
fn edited_hints_in_a_file_are_read_as_claims_and_not_believed() {
    use capability::manifest::{HintKind, HintSource};
    let read = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut value = serde_json::to_value(PromQuery::manifest()).expect("serializes");
        edit(&mut value);
        serde_json::from_value::<CapabilityManifest>(value).expect("well-formed")
    };

    // A read-only tool made destructive by hand: `effective` is not read, only recomputed.
    let m = read(&|v| v["destructive"]["effective"] = true.into());
    assert_eq!(
        m.hint(HintKind::Destructive).source(),
        HintSource::Defaulted
    );
    assert_eq!(m.hint(HintKind::Destructive).stated(), None);

    // A read-only tool given a mutating scope: a claim, so not a contradiction, and not believed.
    let m = read(&|v| v["required_scopes"] = serde_json::json!(["k8s:write"]));
    assert!(!m.read_only());
    assert_eq!(m.required_scopes(), ["k8s:write"]);
    assert_eq!(m.hint(HintKind::ReadOnly).stated(), Some(true));

    // `effective` and `source` may be left out: only `stated` counts.
    let m = read(&|v| v["idempotent"] = serde_json::json!({"stated": false}));
    assert_eq!(m.hint(HintKind::Idempotent).stated(), Some(false));
    assert_eq!(
        m.hint(HintKind::Idempotent).source(),
        HintSource::UntrustedClaim
    );
}

#[test]
fn display_is_one_readable_line() {
    assert_eq!(
        PromQuery::manifest().to_string(),
        "prom_query [read-only, idempotent, closed world] scopes: metrics:read"
    );
    assert_eq!(
        RestartPod::manifest().to_string(),
        "k8s/restart_pod [destructive, open world] scopes: k8s:write"
    );
}
