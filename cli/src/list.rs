//! `toolhost list PLUGIN...`.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context as _;
use toolhost::registry::CatalogEntry;

use crate::common::{Common, activate_all, specs};
use crate::std_tools::StdArgs;
use crate::{Failure, exit, stdio, terminal};

pub(crate) async fn run(
    plugins: &[PathBuf],
    std: &StdArgs,
    common: &Common,
) -> Result<u8, Failure> {
    let host = common.host(None, true).await?;
    let mut specs = specs(plugins, common)?;
    std.add(&mut specs, common)?;
    let (location, _activations) = activate_all(&host, &specs).await?;
    let catalog = location.catalog();
    if common.json {
        let rows: Vec<_> = catalog.iter().map(json_row).collect();
        stdio::line(&serde_json::to_string_pretty(&rows).context("cannot print the list")?)?;
    } else {
        print_table(&catalog)?;
    }
    Ok(exit::COMPLETED)
}

fn provider(e: &CatalogEntry) -> String {
    e.tool
        .plugin()
        .map_or_else(|| "native".to_owned(), |p| p.name.clone())
}

fn json_row(e: &CatalogEntry) -> serde_json::Value {
    serde_json::json!({
        "name": e.name,
        "plugin": provider(e),
        "version": e.tool.plugin().map(|p| p.version.clone()),
        "registration": e.registration,
        "shadowed": e.shadowed,
        "description": e.tool.description(),
        "input_schema": e.tool.input_schema().document(),
        "output_schema": e.tool.output_schema().map(|s| s.document()),
    })
}

/// One table row as shown: escaped on a terminal (R30), as given otherwise.
struct Row {
    name: String,
    plugin: String,
    description: String,
    schema: String,
    shadowed: bool,
}

impl Row {
    fn new(e: &CatalogEntry, terminal: bool) -> Row {
        let shown = |s: &str, escape: fn(&str) -> String| {
            if terminal { escape(s) } else { s.to_owned() }
        };
        Row {
            name: shown(&e.name, terminal::line),
            plugin: shown(&provider(e), terminal::line),
            description: shown(e.tool.description(), terminal::text),
            schema: shown(
                &e.tool.input_schema().document().to_string(),
                terminal::line,
            ),
            shadowed: e.shadowed,
        }
    }
}

fn print_table(catalog: &[CatalogEntry]) -> anyhow::Result<()> {
    if catalog.is_empty() {
        return stdio::line("(no tools registered)");
    }
    let terminal = std::io::stdout().is_terminal();
    let rows: Vec<Row> = catalog.iter().map(|e| Row::new(e, terminal)).collect();
    let name_w = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    let plugin_w = rows
        .iter()
        .map(|r| r.plugin.len())
        .max()
        .unwrap_or(6)
        .max(6);
    stdio::line(&format!(
        "{:name_w$}  {:plugin_w$}  DESCRIPTION",
        "NAME", "PLUGIN"
    ))?;
    for r in &rows {
        let shadowed = if r.shadowed { "  (shadowed)" } else { "" };
        stdio::line(&format!(
            "{:name_w$}  {:plugin_w$}  {}{shadowed}",
            r.name, r.plugin, r.description
        ))?;
        stdio::line(&format!("{:name_w$}  input: {}", "", r.schema))?;
    }
    Ok(())
}
