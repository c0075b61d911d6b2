//! `toolhost list PLUGIN...`.

use std::path::PathBuf;

use anyhow::Context as _;
use toolhost::CatalogEntry;

use crate::common::{Common, activate_all, specs};
use crate::{Failure, exit};

pub(crate) async fn run(plugins: &[PathBuf], common: &Common) -> Result<u8, Failure> {
    let host = common.host(None)?;
    let specs = specs(plugins, common)?;
    let (location, _activations) = activate_all(&host, &specs).await?;
    let catalog = location.catalog();
    if common.json {
        let rows: Vec<_> = catalog.iter().map(json_row).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).context("cannot print the list")?
        );
    } else {
        print_table(&catalog);
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

fn print_table(catalog: &[CatalogEntry]) {
    if catalog.is_empty() {
        println!("(no tools registered)");
        return;
    }
    let name_w = catalog
        .iter()
        .map(|e| e.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let plugin_w = catalog
        .iter()
        .map(|e| provider(e).len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!("{:name_w$}  {:plugin_w$}  DESCRIPTION", "NAME", "PLUGIN");
    for e in catalog {
        let shadowed = if e.shadowed { "  (shadowed)" } else { "" };
        println!(
            "{:name_w$}  {:plugin_w$}  {}{shadowed}",
            e.name,
            provider(e),
            e.tool.description()
        );
        println!(
            "{:name_w$}  input: {}",
            "",
            e.tool.input_schema().document()
        );
    }
}
