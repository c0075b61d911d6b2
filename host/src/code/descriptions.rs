//! `execute`'s description for recently seen tool sets, so that a model
//! request whose advertised tools have not changed renders no declarations.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use crate::model::tool::WeakTool;
use crate::registry::snapshot::CapturedTools;

/// Tool sets whose description is kept: a host's locations, sessions and
/// visibility filters in use at once. The oldest is dropped beyond it and
/// rendered again when next seen.
const KEPT_TOOL_SETS: usize = 16;

/// Descriptions keyed by the advertised tools, by name and identity.
#[derive(Default)]
pub(super) struct Descriptions {
    kept: Mutex<VecDeque<Kept>>,
}

struct Kept {
    tools: Vec<(String, WeakTool)>,
    description: String,
}

impl Kept {
    fn describes(&self, captured: &CapturedTools) -> bool {
        self.tools.len() == captured.advertised().len()
            && self
                .tools
                .iter()
                .zip(captured.advertised())
                .all(|((name, tool), advertised)| {
                    name == advertised && captured.tools.get(name).is_some_and(|t| tool.is(t))
                })
    }
}

impl Descriptions {
    /// The description of `captured`'s advertised tools: kept, or made by
    /// `render` and kept.
    pub(super) fn get(&self, captured: &CapturedTools, render: impl FnOnce() -> String) -> String {
        if let Some(hit) = self.lock().iter().find(|k| k.describes(captured)) {
            return hit.description.clone();
        }
        let description = render();
        let tools = captured
            .advertised()
            .iter()
            .filter_map(|name| Some((name.clone(), captured.tools.get(name)?.downgrade())))
            .collect();
        let mut kept = self.lock();
        if kept.len() == KEPT_TOOL_SETS {
            kept.pop_front();
        }
        kept.push_back(Kept {
            tools,
            description: description.clone(),
        });
        description
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Kept>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::model::content::ToolResponse;
    use crate::model::tool::Tool;

    fn tool(description: &str) -> Tool {
        Tool::native(description, json!({"type": "object"}), None, |_, _| async {
            Ok(ToolResponse::default())
        })
        .unwrap()
    }

    fn captured(tools: &[(&str, &Tool)]) -> CapturedTools {
        let tools: BTreeMap<String, Tool> = tools
            .iter()
            .map(|(name, tool)| (name.to_string(), Tool::clone(tool)))
            .collect();
        let advertised = tools.keys().cloned().collect();
        CapturedTools::new(tools, advertised, false)
    }

    /// Gets the description of `set`, counting renders.
    fn get(cache: &Descriptions, set: &CapturedTools, renders: &Cell<u32>) -> String {
        cache.get(set, || {
            renders.set(renders.get() + 1);
            format!("render {}", renders.get())
        })
    }

    #[test]
    fn an_unchanged_tool_set_is_rendered_once() {
        let (a, b) = (tool("a"), tool("b"));
        let cache = Descriptions::default();
        let renders = Cell::new(0);
        let first = get(&cache, &captured(&[("a", &a), ("b", &b)]), &renders);
        let again = get(&cache, &captured(&[("a", &a), ("b", &b)]), &renders);
        assert_eq!((first.as_str(), again.as_str()), ("render 1", "render 1"));
        assert_eq!(renders.get(), 1);
    }

    #[test]
    fn a_changed_tool_set_is_rendered_again() {
        let (a, b) = (tool("a"), tool("b"));
        let same_text = tool("b");
        let cache = Descriptions::default();
        let renders = Cell::new(0);
        get(&cache, &captured(&[("a", &a), ("b", &b)]), &renders);
        // Another registration, even with identical contents.
        get(&cache, &captured(&[("a", &a), ("b", &same_text)]), &renders);
        // A tool fewer, and a renamed one.
        get(&cache, &captured(&[("a", &a)]), &renders);
        get(&cache, &captured(&[("a", &a), ("c", &b)]), &renders);
        assert_eq!(renders.get(), 4);
        // Every one of them is kept.
        get(&cache, &captured(&[("a", &a), ("b", &b)]), &renders);
        assert_eq!(renders.get(), 4);
    }

    #[test]
    fn the_oldest_tool_set_is_dropped_beyond_the_limit() {
        let tools: Vec<Tool> = (0..=KEPT_TOOL_SETS).map(|i| tool(&i.to_string())).collect();
        let cache = Descriptions::default();
        let renders = Cell::new(0);
        for t in &tools {
            get(&cache, &captured(&[("t", t)]), &renders);
        }
        let total = KEPT_TOOL_SETS as u32 + 1;
        assert_eq!(renders.get(), total);
        get(
            &cache,
            &captured(&[("t", &tools[KEPT_TOOL_SETS])]),
            &renders,
        );
        assert_eq!(renders.get(), total, "the newest is kept");
        get(&cache, &captured(&[("t", &tools[0])]), &renders);
        assert_eq!(renders.get(), total + 1, "the oldest was dropped");
    }

    #[test]
    fn a_kept_description_does_not_keep_its_tools_alive() {
        let alive = std::sync::Arc::new(());
        let held = alive.clone();
        let a = Tool::native("a", json!({"type": "object"}), None, move |_, _| {
            let _held = &held;
            async { Ok(ToolResponse::default()) }
        })
        .unwrap();
        let cache = Descriptions::default();
        let renders = Cell::new(0);
        get(&cache, &captured(&[("a", &a)]), &renders);
        drop(a);
        assert_eq!(
            std::sync::Arc::strong_count(&alive),
            1,
            "the tool was freed"
        );
        // A new tool under the same name is told apart.
        get(&cache, &captured(&[("a", &tool("b"))]), &renders);
        assert_eq!(renders.get(), 2);
    }
}
