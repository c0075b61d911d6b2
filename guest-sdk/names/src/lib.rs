//! Toolhost's tool-name rules (R1), defined once: the host applies them when
//! a plugin registers its tools, and `toolhost-sdk`'s `#[tool]` applies them
//! at compile time, so the two can never disagree.
//!
//! Every character outside `[A-Za-z0-9_-]` becomes `_`; the result must be
//! 1 to [`MAX_NAME_LEN`] characters and must not be [`RESERVED_NAME`].
//!
//! ```
//! use toolhost_names::{MAX_NAME_LEN, NameError, normalize_name};
//!
//! assert_eq!(normalize_name("regex.search").unwrap(), "regex_search");
//! assert_eq!(normalize_name(""), Err(NameError::Empty));
//! assert!(matches!(
//!     normalize_name(&"a".repeat(MAX_NAME_LEN + 1)),
//!     Err(NameError::TooLong(_, 65))
//! ));
//! ```

#![no_std]
#![deny(missing_docs)]

extern crate alloc;

use alloc::string::String;
use core::fmt;

/// The longest effective tool name, in characters: the limit model
/// providers put on function names.
pub const MAX_NAME_LEN: usize = 64;

/// The name reserved for Code Mode's one tool.
///
/// ```
/// use toolhost_names::{NameError, RESERVED_NAME, normalize_name};
///
/// assert_eq!(normalize_name(RESERVED_NAME), Err(NameError::Reserved));
/// ```
pub const RESERVED_NAME: &str = "execute";

/// Why a name cannot become an effective tool name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// Empty after normalization.
    Empty,
    /// Longer than [`MAX_NAME_LEN`]: the normalized name and its length in
    /// characters.
    TooLong(String, usize),
    /// The [reserved name](RESERVED_NAME).
    Reserved,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty => write!(
                f,
                "tool name is empty; give the tool a name of 1-{MAX_NAME_LEN} characters from [A-Za-z0-9_-]"
            ),
            NameError::TooLong(name, len) => write!(
                f,
                "tool name `{name}` is {len} characters long; shorten it to at most {MAX_NAME_LEN}"
            ),
            NameError::Reserved => write!(
                f,
                "tool name `{RESERVED_NAME}` is reserved for Code Mode; pick another name"
            ),
        }
    }
}

impl core::error::Error for NameError {}

/// Normalizes an authored name into the effective, model-facing name: every
/// character outside `[A-Za-z0-9_-]` becomes `_` (one `_` per character, so
/// the length in characters is kept), then the length and the reserved name
/// are checked.
///
/// ```
/// use toolhost_names::normalize_name;
///
/// assert_eq!(normalize_name("héllo wörld").unwrap(), "h_llo_w_rld");
/// assert_eq!(normalize_name("ok-name_1").unwrap(), "ok-name_1");
/// ```
pub fn normalize_name(authored: &str) -> Result<String, NameError> {
    let name: String = authored
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // Every character became one ASCII byte.
    let len = name.len();
    if len == 0 {
        Err(NameError::Empty)
    } else if len > MAX_NAME_LEN {
        Err(NameError::TooLong(name, len))
    } else if name == RESERVED_NAME {
        Err(NameError::Reserved)
    } else {
        Ok(name)
    }
}

// The README (the crates.io page) is tested like the rest of the docs.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::*;

    #[test]
    fn the_limit_counts_characters_not_bytes() {
        let long = "é".repeat(MAX_NAME_LEN);
        assert_eq!(normalize_name(&long).unwrap(), "_".repeat(MAX_NAME_LEN));
        let longer = "é".repeat(MAX_NAME_LEN + 1);
        assert!(matches!(
            normalize_name(&longer),
            Err(NameError::TooLong(_, 65))
        ));
    }

    #[test]
    fn only_the_exact_reserved_name_is_reserved() {
        assert_eq!(normalize_name("execute"), Err(NameError::Reserved));
        assert_eq!(normalize_name("Execute").unwrap(), "Execute");
        assert_eq!(normalize_name("exécute").unwrap(), "ex_cute");
        assert_eq!(normalize_name("execute_"), Ok("execute_".into()));
    }

    #[test]
    fn errors_say_what_to_do() {
        assert!(NameError::Empty.to_string().contains("1-64 characters"));
        let long = NameError::TooLong("x".repeat(70), 70).to_string();
        assert!(long.contains("70 characters long; shorten it to at most 64"));
        assert!(
            NameError::Reserved
                .to_string()
                .contains("reserved for Code Mode")
        );
    }
}
