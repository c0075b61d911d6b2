#!/usr/bin/env bash
# Build the C example plugin into OUT_DIR/c_echo.wasm.
#
#   example-plugins/c-echo/build.sh OUT_DIR
#
# Needs, on PATH:
#   wit-bindgen  (wit-bindgen-cli 0.63.0) to generate the C bindings;
#   wasm-tools   (1.263.0) to wrap the core module into a component;
#   zig          (or the PyPI package ziglang 0.17.1: `python3 -m ziglang`),
#                whose `zig cc` is the C compiler; ZIG=... overrides.
# `cargo xtask test` installs the first two into target/tools/bin and
# ziglang into target/venv.
#
# Zig targets WASI 0.1 (wasm32-wasi), not 0.2, so this builds a core module
# and `wasm-tools component new` makes it a component. The plugin uses no
# WASI function (only malloc and string functions, which import nothing), so
# no WASI 0.1 adapter is needed and the component imports only the world's
# interfaces. Bindings are generated from the repository's wit/v0.1 into a
# scratch directory each time, so they always match the WIT world.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../wit/v0.1"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

if [ -n "${ZIG:-}" ]; then
    read -r -a zig <<<"$ZIG"
elif command -v zig >/dev/null; then
    zig=(zig)
else
    zig=(python3 -m ziglang)
fi

# wit-bindgen names every file it writes; show that only when it fails.
if ! log="$(wit-bindgen c "$wit" --world tool-plugin --out-dir "$scratch" 2>&1)"; then
    echo "$log" >&2
    exit 1
fi
# A reactor has no main: the host calls the world's exports. -s strips debug
# information but keeps the component-type section the bindings add.
"${zig[@]}" cc -target wasm32-wasi -mexec-model=reactor -Os -s \
    -Wall -Wextra -Werror -Wno-unused-parameter -std=c11 \
    -I "$scratch" "$here/echo.c" "$scratch/tool_plugin.c" \
    "$scratch/tool_plugin_component_type.o" -o "$scratch/c_echo.core.wasm"
wasm-tools component new "$scratch/c_echo.core.wasm" -o "$out/c_echo.wasm"
