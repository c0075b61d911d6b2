//! How one plugin is loaded: its name, configuration, budgets, grants,
//! rules and bounds. Every capability starts denied.

use serde_json::Value;

use crate::config::compile::CompileLimits;
use crate::config::grants::Grants;
use crate::model::budget::{BudgetOverrides, HttpLimits, OutputBounds};
use crate::permission::Rules;

/// How to load a plugin. Every capability starts denied.
#[derive(Debug, Clone)]
pub struct PluginOptions {
    /// Name to report. Default: the file stem.
    pub name: Option<String>,
    /// Version to report. Default: `blake3:` plus 12 hex digits of the hash.
    pub version: Option<String>,
    /// JSON passed to `activate`. Default: `{}`.
    pub config: Value,
    /// Budget overrides for this plugin's calls. Default: the host's budget.
    pub overrides: BudgetOverrides,
    /// Calls of this plugin in flight at once. Default: the host's
    /// concurrency (`toolhost::limits::DEFAULT_CONCURRENCY`).
    pub concurrency: Option<usize>,
    /// WASI capabilities. Default: none.
    pub grants: Grants,
    /// Permission rules added after the host's. Default: none.
    pub rules: Rules,
    /// Output bounds for this plugin's tools. Default: the host's bounds.
    pub bounds: Option<OutputBounds>,
    /// Outbound HTTP limits of its calls. Default: the host's.
    pub http_limits: Option<HttpLimits>,
    /// Bounds on compiling it. Default: [`CompileLimits::default`]
    /// (`toolhost::limits::DEFAULT_COMPILE_TIMEOUT`, `toolhost::limits::DEFAULT_COMPILE_MEMORY`).
    pub compile: CompileLimits,
}

impl Default for PluginOptions {
    fn default() -> Self {
        PluginOptions {
            name: None,
            version: None,
            config: Value::Object(Default::default()),
            overrides: BudgetOverrides::default(),
            concurrency: None,
            grants: Grants::default(),
            rules: Rules::default(),
            bounds: None,
            http_limits: None,
            compile: CompileLimits::default(),
        }
    }
}
