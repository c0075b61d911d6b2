//! The standard toolset's plugin of the tools that change files: `write`,
//! `edit` and `apply_patch`. Left out by `toolhost --std-readonly`.

use toolhost_std_tools::{ApplyPatch, Edit, Write};

toolhost_sdk::plugin!([Write, Edit, ApplyPatch]);
