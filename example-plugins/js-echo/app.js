// Example Toolhost plugin in JavaScript: `js_echo` repeats a message and
// `js_fetch` GETs a URL with fetch() and returns its JSON body.
//
// Built with componentize-js (StarlingMonkey) or jco's QuickJS backend
// against the repository's wit/v0.1 (see build.sh). There is no SDK: the module
// imports the world's interfaces by their WIT names and exports `plugin`.

import { register } from "toolhost:plugin/registry@0.1.0";

const SCHEMA = "https://json-schema.org/draft/2020-12/schema";

const TOOLS = [
  {
    name: "js_echo",
    description: "Repeat a message back unchanged.",
    inputSchema: JSON.stringify({
      $schema: SCHEMA,
      type: "object",
      properties: { message: { type: "string", description: "The message to repeat." } },
      required: ["message"],
    }),
    outputSchema: JSON.stringify({
      $schema: SCHEMA,
      type: "object",
      properties: { message: { type: "string" } },
      required: ["message"],
    }),
  },
  {
    name: "js_fetch",
    description: "GET a URL and return its JSON body. Needs an HTTP grant for the URL's origin.",
    inputSchema: JSON.stringify({
      $schema: SCHEMA,
      type: "object",
      properties: { url: { type: "string", description: "The http:// or https:// URL to GET." } },
      required: ["url"],
    }),
    // No output schema: any JSON the server sends is the output.
    outputSchema: undefined,
  },
];

// Dropping the registration would unregister the tools, so the activation
// instance keeps it for as long as it lives.
let registration;

// A `result<_, tool-failure>` error is whatever `execute` throws (or its
// promise rejects with), as the record itself.
function failure(message) {
  return { message, metadata: undefined };
}

async function fetchJson(url) {
  let response;
  try {
    response = await fetch(url);
  } catch (error) {
    // The host refuses ungranted origins inside the guest: fetch rejects.
    throw failure(`GET ${url} failed: ${error}`);
  }
  if (!response.ok) {
    throw failure(`GET ${url} answered ${response.status}`);
  }
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    throw failure(`GET ${url} did not answer JSON`);
  }
  return { output: JSON.stringify(body), content: undefined, metadata: undefined };
}

export const plugin = {
  activate(config) {
    try {
      registration = register(TOOLS);
    } catch (error) {
      // An imported function's error arrives as an exception whose
      // `payload` is the registration-error variant.
      const why = error.payload ? `${error.payload.tag}: ${JSON.stringify(error.payload.val)}` : String(error);
      throw `cannot register the js-echo tools: ${why}`;
    }
  },

  execute(tool, input, context) {
    // Every call runs in a fresh instance: nothing from activate is here.
    const args = JSON.parse(input);
    switch (tool) {
      case "js_echo":
        return {
          output: JSON.stringify({ message: args.message }),
          content: [{ tag: "text", val: args.message }],
          metadata: undefined,
        };
      case "js_fetch":
        // The QuickJS build without async has no fetch() and cannot wait
        // for a promise, so this check must happen before anything async.
        if (typeof fetch !== "function") {
          throw failure("fetch() is not available in this build of js-echo; build it with StarlingMonkey");
        }
        // StarlingMonkey runs the event loop until the promise settles.
        return fetchJson(args.url);
      default:
        throw failure(`unknown tool "${tool}"; this plugin provides: js_echo, js_fetch`);
    }
  },
};
