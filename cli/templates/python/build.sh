#!/usr/bin/env bash
# Builds dist/{{crate_name}}.wasm from src/ with componentize-py
# (`pip install -r requirements.txt`).
#
# The bindings (the `wit_world` package) are generated from wit/ into a
# scratch directory on every build, so they always match the WIT.
set -euo pipefail

cd "$(dirname "$0")"
if ! command -v componentize-py >/dev/null; then
    echo "componentize-py not found: pip install -r requirements.txt (in a venv)" >&2
    exit 1
fi
bindings="$(mktemp -d)"
trap 'rm -rf "$bindings"' EXIT

componentize-py -d wit -w tool-plugin bindings "$bindings"
mkdir -p dist
componentize-py -d wit -w tool-plugin componentize \
    -p src -p "$bindings" app -o dist/{{crate_name}}.wasm
echo "built dist/{{crate_name}}.wasm"
