//! The standard toolset's plugin of the tools that only look: `read`,
//! `glob`, `grep`, `list` and `webfetch`.

use toolhost_std_tools::{Glob, Grep, List, Read, WebFetch};

toolhost_sdk::plugin!([Read, Glob, Grep, List, WebFetch]);
