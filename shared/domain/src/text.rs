//! The one rule for the short plain-text fields clients set — room names and descriptions,
//! nicknames, role names, poll questions and options, filter words: trimmed, a length in
//! characters within bounds, and no control characters (a description may span lines).

use crate::error::{Error, Result};

/// `value` trimmed, if it is `min..=max` characters on one line.
pub fn plain_text(value: &str, what: &str, min: usize, max: usize) -> Result<String> {
    checked(value, what, min, max, false)
}

/// `value` trimmed, if it is at most `max` characters; line breaks allowed.
pub fn plain_lines(value: &str, what: &str, max: usize) -> Result<String> {
    checked(value, what, 0, max, true)
}

pub fn checked(value: &str, what: &str, min: usize, max: usize, multiline: bool) -> Result<String> {
    let value = value.trim();
    let chars = value.chars().count();
    let control = value.chars().any(|c| c.is_control() && !(multiline && c == '\n'));
    if chars < min || chars > max || control {
        return Err(Error::validation(format!(
            "{what} must be {min}..={max} characters without control characters"
        )));
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_bounds() {
        assert_eq!(plain_text("  hi ", "x", 1, 2).unwrap(), "hi");
        assert!(plain_text("   ", "x", 1, 2).is_err());
        assert!(plain_text("abc", "x", 1, 2).is_err());
        assert!(plain_text("a\tb", "x", 0, 9).is_err());
        assert_eq!(plain_lines("a\nb", "x", 9).unwrap(), "a\nb");
        assert!(plain_lines("a\u{7}b", "x", 9).is_err());
    }
}
