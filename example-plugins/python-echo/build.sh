#!/usr/bin/env bash
# Build the Python example plugin into OUT_DIR/python_echo.wasm.
#
#   example-plugins/python-echo/build.sh OUT_DIR
#
# Needs componentize-py (`pip install componentize-py`). Bindings are
# generated from the repository's wit/v0.1 into a scratch directory each time,
# so they always match the WIT world; app.py is built from a copy there, so
# the build leaves no __pycache__ in the source tree.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../wit/v0.1"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
bindings="$(mktemp -d)"
trap 'rm -rf "$bindings"' EXIT

componentize-py -d "$wit" -w tool-plugin bindings "$bindings"
cp "$here/app.py" "$bindings/"
componentize-py -d "$wit" -w tool-plugin componentize \
    -p "$bindings" app -o "$out/python_echo.wasm"
