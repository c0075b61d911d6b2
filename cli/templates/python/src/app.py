"""{{name}}: a Toolhost plugin in Python with one example tool, `greet`.

The plugin implements the world in wit/world.wit directly: `activate`
registers the tools, `execute` runs one. build.sh generates the bindings (the
`wit_world` package) from that WIT and compiles this module with
componentize-py.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import registry
from wit_world.imports.types import (
    CallContext,
    ContentPart_Text,
    ToolDefinition,
    ToolFailure,
    ToolResponse,
)

SCHEMA = "https://json-schema.org/draft/2020-12/schema"

GREET = ToolDefinition(
    name="greet",
    description="Greet someone by name.",
    # The host checks every call's input against this schema before
    # `execute` runs, and tells the model what to fix when it does not match.
    input_schema=json.dumps(
        {
            "$schema": SCHEMA,
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Who to greet."},
                "excited": {"type": "boolean", "description": "End with an exclamation mark."},
            },
            "required": ["name"],
            "additionalProperties": False,
        }
    ),
    # The output must match this schema, or the call fails instead of
    # handing the model a malformed result.
    output_schema=json.dumps(
        {
            "$schema": SCHEMA,
            "type": "object",
            "properties": {"greeting": {"type": "string"}},
            "required": ["greeting"],
        }
    ),
)


def greet(args: dict) -> ToolResponse:
    name = args["name"].strip()
    if not name:
        # A tool failure is an error the model sees: say how to fix the call.
        raise Err(ToolFailure(message="`name` is blank: give the name of the person to greet.", metadata=None))
    greeting = f"Hello, {name}{'!' if args.get('excited') else '.'}"
    return ToolResponse(
        output=json.dumps({"greeting": greeting}),
        content=[ContentPart_Text(greeting)],
        metadata=None,
    )


# Every tool: its definition, and the function that runs it.
TOOLS = {"greet": (GREET, greet)}

# The registration handle. The tools stay registered only while it lives:
# dropping it (as soon as nothing refers to it) unregisters them. A
# module-level global lives as long as the activation's instance.
_registration = None


class Plugin(exports.Plugin):
    def activate(self, config: str) -> None:
        global _registration
        try:
            _registration = registry.register([definition for definition, _ in TOOLS.values()])
        except Err as error:
            raise Err(f"cannot register the tools: {error.value}")

    def execute(self, tool: str, input: str, context: CallContext) -> ToolResponse:
        # Every call runs in a fresh instance: nothing set in `activate` (or
        # by an earlier call) is here.
        entry = TOOLS.get(tool)
        if entry is None:
            raise Err(ToolFailure(message=f"unknown tool {tool!r}; this plugin has: {', '.join(TOOLS)}", metadata=None))
        _, run = entry
        return run(json.loads(input))
