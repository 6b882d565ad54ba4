//! An edit's input. Edits, deletes and pins are `crate::service::changes`.

use serde::Deserialize;
use utoipa::ToSchema;

/// A new text for a message.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Edit {
    /// HTML, sanitized like a send; something must be left visible, at most 10000 characters
    /// after sanitizing.
    #[schema(min_length = 1)]
    pub text: String,
}
