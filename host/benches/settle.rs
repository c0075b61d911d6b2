//! Criterion benchmarks of the hot paths: a settled call (wasm and native,
//! through the same registry) and bounding a 100 MB output.
//! `cargo bench -p toolhost --features bench --bench settle`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use toolhost::bench_support::{count_lines, preview, within};
use toolhost::config::{OutputBounds, PluginOptions};
use toolhost::{Call, Host, Tool, ToolResponse};
use toolhost_tests::context;

toolhost_tests::plugin_paths!();

fn settle(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let host = Host::builder().without_store().build().unwrap();
    let location = host.location("/bench");
    let _activation = rt
        .block_on(location.load(TEXT_TOOLS, &PluginOptions::default()))
        .unwrap();
    let wasm = location.snapshot();
    let schema = json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]});
    let native_tool = Tool::native(
        "echo",
        schema.clone(),
        Some(schema),
        |input, _| async move {
            Ok(ToolResponse {
                output: Some(input),
                ..Default::default()
            })
        },
    )
    .unwrap();
    let native_location = host.location("/bench-native");
    let _registration = native_location.register([("echo", native_tool)]).unwrap();
    let native = native_location.snapshot();
    let input = r#"{"message":"hello"}"#;
    c.bench_function("settle/echo/wasm-fresh-instance", |b| {
        b.iter(|| rt.block_on(wasm.settle(Call::new("echo", input, context("bench")))))
    });
    c.bench_function("settle/echo/native", |b| {
        b.iter(|| rt.block_on(native.settle(Call::new("echo", input, context("bench")))))
    });
}

fn bounding(c: &mut Criterion) {
    let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
    let text = line.repeat(100_000_000 / line.len());
    let bounds = OutputBounds::default();
    let mut group = c.benchmark_group("bound");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(10);
    group.bench_function("100MB/measure+preview", |b| {
        b.iter(|| {
            assert!(!within(black_box(&text), &bounds));
            black_box(count_lines(&text));
            black_box(preview(&text, &bounds, "toolhost-output:0123456789abcdef"))
        })
    });
    group.finish();
}

criterion_group!(benches, settle, bounding);
criterion_main!(benches);
