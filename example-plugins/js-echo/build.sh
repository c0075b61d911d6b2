#!/usr/bin/env bash
# Build the JavaScript example plugin into OUT_DIR.
#
#   example-plugins/js-echo/build.sh OUT_DIR [ENGINE]
#
# ENGINE is one of
#   starlingmonkey  (default) componentize-js: OUT_DIR/js_echo.wasm, with
#                   fetch() over wasi:http;
#   quickjs         jco's QuickJS backend without the component-model async
#                   ABI: OUT_DIR/js_echo_qjs.wasm (small; no fetch());
#   quickjs-async   jco's QuickJS backend as it builds by default:
#                   OUT_DIR/js_echo_qjs_async.wasm. Toolhost refuses it (it
#                   uses component-model async, which the host does not
#                   enable); the tests build it to check that refusal.
#
# Needs Node 20.19 or newer and npm. The pinned packages of package-lock.json
# are installed with `npm ci` into node_modules here (git-ignored), again
# only when the lockfile changes.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 OUT_DIR [starlingmonkey|quickjs|quickjs-async]" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../wit/v0.1"
engine="${2:-starlingmonkey}"
mkdir -p "$1"
out="$(cd "$1" && pwd)"

# Concurrent builds (parallel tests) share node_modules: one installs, the
# others wait for it (the lock is on the lockfile, so no lock file is left).
(
    flock 9
    stamp="$here/node_modules/.toolhost-package-lock.json"
    if ! cmp -s "$here/package-lock.json" "$stamp"; then
        (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
        cp "$here/package-lock.json" "$stamp"
    fi
) 9<"$here/package-lock.json"
bin="$here/node_modules/.bin"

case "$engine" in
starlingmonkey)
    "$bin/componentize-js" "$here/app.js" --wit "$wit" --world-name tool-plugin \
        --out "$out/js_echo.wasm"
    ;;
quickjs)
    "$bin/jco" componentize "$here/app.js" --wit "$wit" --world-name tool-plugin \
        --backend qjs --backend-qjs-disable-async --out "$out/js_echo_qjs.wasm"
    ;;
quickjs-async)
    "$bin/jco" componentize "$here/app.js" --wit "$wit" --world-name tool-plugin \
        --backend qjs --out "$out/js_echo_qjs_async.wasm"
    ;;
*)
    echo "$0: unknown ENGINE '$engine'; use starlingmonkey, quickjs or quickjs-async" >&2
    exit 2
    ;;
esac
