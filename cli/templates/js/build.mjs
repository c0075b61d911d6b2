// Builds dist/{{crate_name}}.wasm from src/plugin.js with componentize-js
// (`npm run build`): the module, a JS engine (StarlingMonkey) and the
// bindings of wit/world.wit in one component.

import { mkdir, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

import { componentize } from "@bytecodealliance/componentize-js";

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
const out = "dist/{{crate_name}}.wasm";

const { component } = await componentize({
  sourcePath: here("src/plugin.js"),
  witPath: here("wit"),
  worldName: "tool-plugin",
  // Every WASI feature stays on: console output reaches the host's captured
  // logs, and fetch() works for the origins that toolhost.toml grants
  // (without a grant, every request fails inside the plugin).
});
await mkdir(here("dist"), { recursive: true });
await writeFile(here(out), component);
console.log(`built ${out} (${(component.byteLength / 1e6).toFixed(1)} MB)`);
