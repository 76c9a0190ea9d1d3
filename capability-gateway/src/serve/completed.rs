//! Forwarded results marked complete for clients of 2026-07-28.

use ::rmcp::model::{
    CallToolResponse, CallToolResult, CompleteResult, GetPromptResponse, GetPromptResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ReadResourceResponse,
    ReadResourceResult, ResultType,
};

/// A forwarded result, marked `resultType: "complete"` when the server (of 2025-11-25) did not
/// say: a client of 2026-07-28 must find it in every result, and rmcp takes it out again for a
/// client of the older revision.
pub(crate) trait Completed {
    fn completed(self) -> Self;
}

macro_rules! completed {
    ($($result:ty),* $(,)?) => {$(
        impl Completed for $result {
            fn completed(mut self) -> Self {
                self.result_type.get_or_insert(ResultType::COMPLETE);
                self
            }
        }
    )*};
}

completed!(
    CallToolResult,
    GetPromptResult,
    ReadResourceResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListPromptsResult,
    CompleteResult,
);

impl Completed for CallToolResponse {
    fn completed(self) -> Self {
        match self {
            CallToolResponse::Complete(result) => CallToolResponse::Complete(result.completed()),
            other => other,
        }
    }
}

impl Completed for GetPromptResponse {
    fn completed(self) -> Self {
        match self {
            GetPromptResponse::Complete(result) => GetPromptResponse::Complete(result.completed()),
            other => other,
        }
    }
}

impl Completed for ReadResourceResponse {
    fn completed(self) -> Self {
        match self {
            ReadResourceResponse::Complete(result) => {
                ReadResourceResponse::Complete(result.completed())
            }
            other => other,
        }
    }
}
