// {{name}}: a Toolhost plugin in JavaScript with one example tool, `greet`.
//
// The module implements the world in wit/world.wit directly: it imports the
// host's interfaces by their WIT names and exports `plugin` (`activate`
// registers the tools, `execute` runs one). `npm run build` compiles it with
// componentize-js.

import { register } from "toolhost:plugin/registry@0.1.0";

const SCHEMA = "https://json-schema.org/draft/2020-12/schema";

const GREET = {
  name: "greet",
  description: "Greet someone by name.",
  // The host checks every call's input against this schema before `execute`
  // runs, and tells the model what to fix when it does not match.
  inputSchema: JSON.stringify({
    $schema: SCHEMA,
    type: "object",
    properties: {
      name: { type: "string", description: "Who to greet." },
      excited: { type: "boolean", description: "End with an exclamation mark." },
    },
    required: ["name"],
    additionalProperties: false,
  }),
  // The output must match this schema, or the call fails instead of handing
  // the model a malformed result.
  outputSchema: JSON.stringify({
    $schema: SCHEMA,
    type: "object",
    properties: { greeting: { type: "string" } },
    required: ["greeting"],
  }),
};

/** A tool failure: an error the model sees, so say how to fix the call. */
function failure(message) {
  return { message };
}

function greet({ name, excited = false }) {
  const trimmed = name.trim();
  if (trimmed === "") {
    throw failure("`name` is blank: give the name of the person to greet.");
  }
  const greeting = `Hello, ${trimmed}${excited ? "!" : "."}`;
  return {
    output: JSON.stringify({ greeting }),
    content: [{ tag: "text", val: greeting }],
  };
}

// Every tool: its definition, and the function that runs it.
const TOOLS = new Map([["greet", { definition: GREET, run: greet }]]);

// The registration handle. The tools stay registered only while it lives:
// once nothing refers to it, it can be dropped, which unregisters them. A
// module-level variable lives as long as the activation's instance.
let registration = null;

export const plugin = {
  activate(_config) {
    try {
      registration = register([...TOOLS.values()].map((tool) => tool.definition));
    } catch (error) {
      // `register` throws the WIT `registration-error` as `error.payload`.
      throw `cannot register the tools: ${JSON.stringify(error.payload ?? String(error))}`;
    }
  },

  execute(tool, input, _context) {
    // Every call runs in a fresh instance: nothing set in `activate` (or by
    // an earlier call) is here.
    const entry = TOOLS.get(tool);
    if (entry === undefined) {
      throw failure(`unknown tool "${tool}"; this plugin has: ${[...TOOLS.keys()].join(", ")}`);
    }
    return entry.run(JSON.parse(input));
  },
};
