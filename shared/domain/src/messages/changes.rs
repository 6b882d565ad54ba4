//! An edit's input. Edits, deletes and pins are `crate::service::changes`.

use serde::Deserialize;
use utoipa::ToSchema;

/// A new text for a message.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Edit {
    /// HTML, sanitized like a send; something must be left visible, at most 10000 characters
    /// after sanitizing. Or Markdown, with `format: markdown`, rendered again.
    #[schema(min_length = 1)]
    pub text: String,
    /// How `text` is written: `html` (the default) or `markdown`.
    #[serde(default)]
    pub format: Option<crate::markdown::TextFormat>,
}

impl Edit {
    /// A new HTML text.
    pub fn text(text: impl Into<String>) -> Edit {
        Edit {
            text: text.into(),
            format: None,
        }
    }
}
