//! Tool names, checked at compile time by the rules the host applies when
//! the plugin registers its tools (every character outside `[A-Za-z0-9_-]`
//! becomes `_`; the result is 1-64 characters and not `execute`), so a bad
//! name fails the build instead of the plugin's activation.

/// The longest name the host accepts, in characters after normalization.
const MAX_LEN: usize = 64;

/// The name Code Mode reserves.
const RESERVED: &str = "execute";

/// Why the host would refuse `name`, or `None` if it accepts it.
pub(crate) fn problem(name: &str) -> Option<String> {
    let normalized: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let len = normalized.chars().count();
    if len == 0 {
        Some(format!(
            "the tool name is empty; give the tool a name of 1-{MAX_LEN} characters from [A-Za-z0-9_-]"
        ))
    } else if len > MAX_LEN {
        Some(format!(
            "the tool name `{name}` is {len} characters long; shorten it to at most {MAX_LEN}"
        ))
    } else if normalized == RESERVED {
        Some(format!(
            "the tool name `{RESERVED}` is reserved for Code Mode; pick another with #[tool(name = \"...\")]"
        ))
    } else {
        None
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
        assert!(problem("execute").unwrap().contains("reserved"));
    }
}
