//! `toolhost compile PLUGIN...`: fill the compile cache.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::common::{Common, specs};
use crate::{Failure, exit, stdio, usage};

pub(crate) async fn run(plugins: &[PathBuf], common: &Common) -> Result<u8, Failure> {
    if common.no_cache {
        return Err(usage(anyhow::anyhow!(
            "compile fills the compile cache; drop --no-cache"
        )));
    }
    let host = common.host(None, true).await?;
    // MCP servers have nothing to compile.
    let specs = specs(plugins, common)?.plugins;
    let bar = if std::io::stderr().is_terminal() && !common.json {
        let bar = ProgressBar::new(specs.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut rows = Vec::new();
    for spec in &specs {
        bar.set_message(spec.source.to_string());
        let start = Instant::now();
        let plugin = host.compile(&spec.source, &spec.options).await?;
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        let info = plugin.info();
        let how = if info.from_cache {
            "already cached"
        } else {
            "compiled"
        };
        bar.inc(1);
        if common.json {
            rows.push(serde_json::json!({
                "plugin": info.name, "path": info.path, "from_cache": info.from_cache, "ms": ms,
            }));
        } else {
            bar.suspend(|| stdio::line(&format!("{how:14} {} ({ms:.1} ms)", info.path.display())))?;
        }
    }
    bar.finish_and_clear();
    if common.json {
        stdio::line(&serde_json::Value::Array(rows).to_string())?;
    }
    Ok(exit::COMPLETED)
}
