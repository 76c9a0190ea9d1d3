//! A held call's approval as a client of 2026-07-28 is asked for it (`held.rs` holds the
//! call): the revision's input-required result naming the proposal, and the client's answer
//! read back as the approval `_meta["capability/approval"]` would carry.

use ::rmcp::ErrorData;
use ::rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value};

use crate::serve::approvals::APPROVAL_META;

/// The key of the gateway's own input request in an input-required result (a held call's
/// approval, asked of a client of 2026-07-28), and of the client's answer to it.
const APPROVAL_INPUT: &str = "capability/approval";

/// What the request state of that result starts with (the proposal's id follows).
const APPROVAL_STATE: &str = "capability/approval:";

/// Takes a client of 2026-07-28's answer to the gateway's own input request out of
/// `forwarded` (its `inputResponses` entry, and the request state the gateway gave): the
/// approval it gives goes into `meta`, as `_meta["capability/approval"]` would carry it (an
/// approval's JSON, or its id); an answer that gives none is why the call is refused.
pub(crate) fn answered_input(
    forwarded: &mut CallToolRequestParams,
    meta: &mut Map<String, Value>,
) -> Result<(), String> {
    if forwarded
        .request_state
        .as_deref()
        .is_some_and(|state| state.starts_with(APPROVAL_STATE))
    {
        forwarded.request_state = None;
    }
    let Some(responses) = forwarded.input_responses.as_mut() else {
        return Ok(());
    };
    let Some(answer) = responses.remove(APPROVAL_INPUT) else {
        return Ok(());
    };
    if responses.is_empty() {
        forwarded.input_responses = None;
    }
    if answer["action"] != "accept" {
        return Err(format!(
            "the client's human answered {} to the approval asked for",
            answer["action"]
        ));
    }
    let Some(given) = answer["content"]["approval"].as_str() else {
        return Err("the answer to the approval asked for names no approval".to_owned());
    };
    let approval = match serde_json::from_str::<Value>(given) {
        Ok(object @ Value::Object(_)) => object,
        _ => Value::String(given.trim().to_owned()),
    };
    meta.insert(APPROVAL_META.to_owned(), approval);
    Ok(())
}

/// A held call's proposal as 2026-07-28 asks a client for input: an input-required result
/// whose one request (an elicitation, keyed [`APPROVAL_INPUT`]) names the proposal and asks
/// for its signed approval, the proposal itself in the result's `_meta`
/// (`capability/proposal`). `None` when `refused` is no proposal (an approval that does not
/// hold stays an error).
pub(crate) fn approval_wanted(refused: &ErrorData) -> Option<::rmcp::model::CallToolResponse> {
    use ::rmcp::model::{
        CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest,
        InputRequiredResult, MetaObject,
    };
    let data = refused.data.as_ref()?;
    let id = data.get("proposal_id")?.as_str()?;
    data.get("proposal")?;
    let schema = ElicitationSchema::builder()
        .required_string("approval")
        .build()
        .ok()?;
    let message = format!(
        "{}. Sign proposal {id} (`capability approve`), then give the approval's id or its \
         JSON here.",
        refused.message
    );
    let request = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    });
    let mut meta = MetaObject::default();
    meta.0
        .insert("capability/proposal".to_owned(), data.clone());
    let asked = InputRequiredResult::new(
        Some(
            [(
                APPROVAL_INPUT.to_owned(),
                InputRequest::Elicitation(request),
            )]
            .into(),
        ),
        Some(format!("{APPROVAL_STATE}{id}")),
    )
    .with_meta(meta);
    Some(CallToolResponse::InputRequired(asked))
}
