//! What a view sees: its placements, highest first (R5, R35), the
//! catalog of every active registration, and the snapshot captured per
//! model request (R8, R11, R12).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use crate::model::tool::{Tool, ToolDefinition};
use crate::permission::Rules;
use crate::registry::placement::{Level, Placement};

/// One active registration of a name, as `toolhost list` shows it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CatalogEntry {
    /// The effective name.
    pub name: String,
    /// The registered tool.
    pub tool: Tool,
    /// The level it is registered at.
    pub level: Level,
    /// Its registration's id.
    pub registration: u64,
    /// Whether a later registration, or one at a higher level, hides it.
    pub shadowed: bool,
}

/// The placements a view sees, highest first: a session's over its
/// location's over the application's. A higher placement shadows a lower
/// one (R5, R35); within one, the latest registration wins (R3).
#[derive(Debug, Clone)]
pub struct Overlay {
    placements: Vec<Arc<Placement>>,
}

impl Overlay {
    /// The overlay of `placements`, highest first.
    pub fn new(placements: Vec<Arc<Placement>>) -> Overlay {
        Overlay { placements }
    }

    /// This overlay with `placement` put above all of it.
    pub fn under(&self, placement: Arc<Placement>) -> Overlay {
        let mut placements = vec![placement];
        placements.extend(self.placements.iter().cloned());
        Overlay { placements }
    }

    /// The effective tool for `name`: the highest placement that has it,
    /// and in it the latest registration.
    pub fn effective(&self, name: &str) -> Option<Tool> {
        self.placements
            .iter()
            .find_map(|p| p.effective(name))
            .map(|(_, t)| t)
    }

    /// Every active registration of every name, sorted by name, with the
    /// winner first for each name and the rest marked shadowed.
    pub fn catalog(&self) -> Vec<CatalogEntry> {
        let mut all: Vec<CatalogEntry> = Vec::new();
        for placement in &self.placements {
            let mut listing = placement.listing();
            listing.reverse();
            all.extend(
                listing
                    .into_iter()
                    .map(|(registration, name, tool)| CatalogEntry {
                        name,
                        tool,
                        level: placement.level,
                        registration,
                        shadowed: false,
                    }),
            );
        }
        // Stable sort keeps higher placements first and, within one,
        // latest first.
        all.sort_by(|a, b| a.name.cmp(&b.name));
        for i in 1..all.len() {
            if all[i].name == all[i - 1].name {
                all[i].shadowed = true;
            }
        }
        all
    }

    /// The effective tools of this overlay, filtered by `options`.
    pub fn capture(&self, options: &SnapshotOptions) -> CapturedTools {
        let mut tools = BTreeMap::new();
        let callable = |name: &str| options.callable.as_ref().is_none_or(|c| c.allows(name));
        for entry in self.catalog().into_iter().filter(|e| !e.shadowed) {
            // Authorization, unlike visibility: a tool the caller may not
            // call is not captured at all.
            if callable(&entry.name) {
                tools.insert(entry.name, entry.tool);
            }
        }
        // Visibility only (R12): hidden tools stay captured and callable.
        let advertised = tools
            .keys()
            .filter(|name| {
                options
                    .visibility
                    .as_ref()
                    .is_none_or(|r| r.is_visible(name))
            })
            .cloned()
            .collect();
        CapturedTools::new(tools, advertised, options.final_step)
    }
}

/// How to take a snapshot.
#[derive(Debug, Clone, Default)]
pub struct SnapshotOptions {
    /// The agent's final step: keep definitions, reject every call (R11).
    /// Default: `false`.
    pub final_step: bool,
    /// Permission rules used to hide tools from the catalog (R12). A tool is
    /// hidden when the last rule matching its name with resource `*` denies
    /// it. Hiding is visibility only: a hidden tool that is called anyway still
    /// settles. Default: none, everything visible.
    pub visibility: Option<Rules>,
    /// Which tools the snapshot's caller may call at all (`serve`: the
    /// OAuth scopes of the caller's token, R40). Unlike `visibility`, this
    /// is authorization: a tool it refuses is not captured, so it is
    /// neither advertised nor callable (`Unknown tool`), and Code Mode's
    /// programs neither see it declared nor can call it, exactly as their
    /// caller could not directly. Default: none, every tool callable.
    pub callable: Option<ToolFilter>,
}

/// A predicate on tool names: which tools a caller may call.
#[derive(Clone)]
pub struct ToolFilter(Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl ToolFilter {
    /// The tools for which `allows` is true.
    pub fn new(allows: impl Fn(&str) -> bool + Send + Sync + 'static) -> ToolFilter {
        ToolFilter(Arc::new(allows))
    }

    /// Whether it allows tool `name`.
    pub fn allows(&self, name: &str) -> bool {
        (self.0)(name)
    }
}

impl std::fmt::Debug for ToolFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolFilter(..)")
    }
}

/// The captured state of a snapshot: the tools, and the names of those
/// advertised. Definitions are made from them when first asked for: a
/// snapshot taken only to settle a call never copies its tools' schemas.
#[derive(Debug, Clone)]
pub struct CapturedTools {
    /// The effective tools by name.
    pub tools: BTreeMap<String, Tool>,
    /// Advertised names, sorted; each is a key of `tools`.
    advertised: Vec<String>,
    definitions: OnceLock<Vec<ToolDefinition>>,
    /// Whether this is the agent's final step: definitions kept, every
    /// call rejected (R11).
    pub final_step: bool,
}

impl CapturedTools {
    /// `tools`, of which `advertised` (sorted; keys of `tools`) are shown.
    pub fn new(tools: BTreeMap<String, Tool>, advertised: Vec<String>, final_step: bool) -> Self {
        debug_assert!(advertised.is_sorted() && advertised.iter().all(|n| tools.contains_key(n)));
        Self {
            tools,
            advertised,
            definitions: OnceLock::new(),
            final_step,
        }
    }

    /// The advertised names, sorted.
    pub fn advertised(&self) -> &[String] {
        &self.advertised
    }

    /// The advertised definitions, sorted by name; made on first use.
    pub fn definitions(&self) -> &[ToolDefinition] {
        self.definitions.get_or_init(|| {
            self.advertised
                .iter()
                .map(|name| self.tools[name].definition(name))
                .collect()
        })
    }

    /// Adds `tool` as `name`, advertised.
    pub fn advertise(&mut self, name: &str, tool: Tool) {
        if let Err(at) = self.advertised.binary_search_by(|n| n.as_str().cmp(name)) {
            self.advertised.insert(at, name.to_owned());
        }
        self.tools.insert(name.to_owned(), tool);
        self.definitions = OnceLock::new();
    }
}
