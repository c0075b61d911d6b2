//! Tool names, checked at compile time by the rules the host applies when
//! the plugin registers its tools (`toolhost-names`, which both use), so a
//! bad name fails the build instead of the plugin's activation.

use toolhost_names::{NameError, RESERVED_NAME, normalize_name};

/// Why the host would refuse `name`, or `None` if it accepts it: the host's
/// own words, with the attribute to use where renaming is the fix.
pub(crate) fn problem(name: &str) -> Option<String> {
    match normalize_name(name) {
        Ok(_) => None,
        Err(NameError::Reserved) => Some(format!(
            "the tool name `{RESERVED_NAME}` is reserved for Code Mode; pick another with #[tool(name = \"...\")]"
        )),
        Err(other) => Some(format!("the {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_host_accepts_pass() {
        for name in ["echo", "regex.search", "a", &"x".repeat(64), "exécute"] {
            assert_eq!(problem(name), None, "{name}");
        }
    }

    #[test]
    fn names_the_host_refuses_are_explained() {
        assert!(problem("").unwrap().contains("empty"));
        assert!(problem(&"é".repeat(65)).unwrap().contains("65 characters"));
        assert!(problem("execute").unwrap().contains("#[tool(name = "));
    }
}
