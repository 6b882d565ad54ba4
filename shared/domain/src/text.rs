//! The one rule for the short plain-text fields clients set — room names and descriptions,
//! nicknames, role names, poll questions and options, filter words: a length in characters
//! within bounds and no control characters (a description may span lines), both of the text as
//! sent, so that the OpenAPI document can say exactly what is accepted ([`ONE_LINE`],
//! [`ONE_LINE_OR_EMPTY`], [`LINES`]); the text is then stored trimmed, and one that must not be
//! empty must hold more than whitespace.

use crate::error::{Error, Result};

/// The characters `str::trim` takes off (Unicode `White_Space`) that are not control
/// characters, spelled out for the patterns below: `\s` means more in some dialects (ECMA-262
/// counts U+FEFF, which Rust does not).
macro_rules! spaces {
    () => {
        r" \u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
    };
}

/// The document's pattern for a one-line text of at least one character that is not
/// whitespace: no control character anywhere.
pub const ONE_LINE: &str = concat!(
    r"^[^\x00-\x1F\x7F-\x9F]*[^",
    spaces!(),
    r"\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$"
);
/// The document's pattern for a one-line text that may be empty.
pub const ONE_LINE_OR_EMPTY: &str = r"^[^\x00-\x1F\x7F-\x9F]*$";
/// The document's pattern for a text whose only control character may be a line break.
pub const LINES: &str = r"^[^\x00-\x09\x0B-\x1F\x7F-\x9F]*$";
/// The document's pattern for a text without whitespace or control characters (an emoji).
pub const NO_SPACES: &str = concat!(r"^[^", spaces!(), r"\x00-\x1F\x7F-\x9F]+$");
/// The document's pattern for a multi-line text of at least one character that is not
/// whitespace.
pub const LINES_NOT_BLANK: &str = concat!(
    r"^[^\x00-\x09\x0B-\x1F\x7F-\x9F]*[^",
    spaces!(),
    r"\x00-\x1F\x7F-\x9F][^\x00-\x09\x0B-\x1F\x7F-\x9F]*$"
);

/// A text field's schema in the OpenAPI document: `min..=max` characters matching `pattern`.
pub fn schema(min: usize, max: usize, pattern: &str) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .min_length((min > 0).then_some(min))
        .max_length(Some(max))
        .pattern(Some(pattern))
        .into()
}

/// Declares a type that stands in the OpenAPI document for a text field this module checks,
/// with the same bounds and pattern as its check (`#[schema(value_type = Name, inline)]` on the
/// field), so the document says what the server accepts from the one place that decides it.
#[macro_export]
macro_rules! text_field {
    ($(#[$doc:meta])* $name:ident, $min:expr, $max:expr, $pattern:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::text::schema($min, $max, $pattern)
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

/// The longest reason a moderator or a reporter gives, in characters.
pub const MAX_REASON_CHARS: usize = 500;

crate::text_field!(
    /// A moderator's reason in the document.
    Reason, 0, MAX_REASON_CHARS, LINES
);

/// `value` trimmed, if it is `min..=max` characters on one line.
pub fn plain_text(value: &str, what: &str, min: usize, max: usize) -> Result<String> {
    checked(value, what, min, max, false)
}

/// `value` trimmed, if it is at most `max` characters; line breaks allowed.
pub fn plain_lines(value: &str, what: &str, max: usize) -> Result<String> {
    checked(value, what, 0, max, true)
}

pub fn checked(value: &str, what: &str, min: usize, max: usize, multiline: bool) -> Result<String> {
    let chars = value.chars().count();
    let control = value.chars().any(|c| c.is_control() && !(multiline && c == '\n'));
    let trimmed = value.trim();
    if chars > max || control || (min > 0 && trimmed.chars().count() < min) {
        return Err(Error::validation(format!(
            "{what} must be {min}..={max} characters without control characters{}",
            if min > 0 { ", not only whitespace" } else { "" }
        )));
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's patterns say what the rule accepts, character for character.
    #[test]
    fn the_documents_patterns_agree_with_the_rule() {
        let samples = [
            "hi", " hi ", "", " ", "   ", "\u{FEFF}", "\u{3000}", "\u{A0}x", "\u{2003}", "a b", "\thi", "hi\n", "x\ny",
            "a\u{85}b", "a\u{7}b", "\u{200B}", "😀", "😀 ", "é",
        ];
        let cases: [(&str, &dyn Fn(&str) -> bool); 5] = [
            (ONE_LINE, &|s| plain_text(s, "x", 1, 100).is_ok()),
            (ONE_LINE_OR_EMPTY, &|s| plain_text(s, "x", 0, 100).is_ok()),
            (LINES, &|s| plain_lines(s, "x", 100).is_ok()),
            (LINES_NOT_BLANK, &|s| {
                plain_lines(s, "x", 100).is_ok_and(|t| !t.is_empty())
            }),
            (NO_SPACES, &|s| {
                plain_text(s, "x", 1, 100).is_ok() && !s.chars().any(char::is_whitespace)
            }),
        ];
        for (pattern, rule) in cases {
            let pattern = regex::Regex::new(pattern).unwrap();
            for sample in samples {
                assert_eq!(pattern.is_match(sample), rule(sample), "{pattern} on {sample:?}");
            }
        }
    }

    #[test]
    fn bounds_the_text_as_sent_and_stores_it_trimmed() {
        assert_eq!(plain_text(" hi ", "x", 1, 4).unwrap(), "hi");
        assert!(
            plain_text("  hi ", "x", 1, 4).is_err(),
            "the limit counts what was sent"
        );
        assert!(plain_text("   ", "x", 1, 9).is_err());
        assert!(plain_text("abc", "x", 1, 2).is_err());
        assert!(plain_text("a\tb", "x", 0, 9).is_err());
        assert!(plain_text("\thi", "x", 0, 9).is_err(), "a control character anywhere");
        assert_eq!(plain_text("", "x", 0, 9).unwrap(), "");
        assert_eq!(plain_lines("a\nb\n", "x", 9).unwrap(), "a\nb");
        assert!(plain_lines("a\u{7}b", "x", 9).is_err());
        assert!(plain_lines("a\u{85}b", "x", 9).is_err(), "C1 controls too");
    }
}
