//! Text rows: rows a backend may index by their words in the transaction that writes them, so
//! that a word search costs a store no extra writes.
//!
//! A text row's key is [`ROW_PREFIX`] and 19 digits (its number); its [`WORDS`] property lists
//! its words, separated by spaces. A backend that keeps a text index
//! ([`TableBackend::indexes_text`](crate::TableBackend::indexes_text)) answers
//! [`Tables::text_query`](crate::Tables::text_query): the text rows of one partition holding a
//! word, in row-key order, from a row key on. A backend without one (Azure Table Storage has no
//! full-text engine) stores them as any other row; its callers keep an index of their own rows.

/// What every text row's key starts with.
pub const ROW_PREFIX: &str = "x:";
/// The property listing a text row's words.
pub const WORDS: &str = "words";
/// Digits of a text row's number.
const NUMBER_DIGITS: usize = 19;

/// The key of the text row numbered `number` (19 digits).
pub fn row_key(number: &str) -> String {
    format!("{ROW_PREFIX}{number}")
}

/// The number of a text row key: `None` unless it is [`ROW_PREFIX`] and 19 digits that fit an
/// `i64`.
pub fn number(row_key: &str) -> Option<i64> {
    let digits = row_key.strip_prefix(ROW_PREFIX)?;
    if digits.len() != NUMBER_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nineteen_digits_within_an_i64_number_a_text_row() {
        assert_eq!(number("x:0000000000000000042"), Some(42));
        assert_eq!(number(&row_key("9223372036854775807")), Some(i64::MAX));
        for key in [
            "x:9223372036854775808",
            "x:42",
            "x:000000000000000004a",
            "w:0000000000000000042",
            "",
        ] {
            assert_eq!(number(key), None, "{key}");
        }
    }
}
