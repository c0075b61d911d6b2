"""Example Toolhost plugin in Python: one tool, `py_echo`, that repeats a message.

Built with componentize-py against the same WIT world as the Rust SDK
(see build.sh). There is no SDK here: the plugin implements the world's
`plugin` export directly.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import registry
from wit_world.imports.types import ContentPart_Text, ToolDefinition, ToolFailure, ToolResponse

SCHEMA = "https://json-schema.org/draft/2020-12/schema"

TOOLS = [
    ToolDefinition(
        name="py_echo",
        description="Repeat a message back unchanged.",
        input_schema=json.dumps(
            {
                "$schema": SCHEMA,
                "type": "object",
                "properties": {"message": {"type": "string", "description": "The message to repeat."}},
                "required": ["message"],
            }
        ),
        output_schema=json.dumps(
            {
                "$schema": SCHEMA,
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"],
            }
        ),
    )
]

# Dropping the registration would unregister the tools, so the activation
# instance keeps it for as long as it lives.
_registration = None


class Plugin(exports.Plugin):
    def activate(self, config: str) -> None:
        global _registration
        try:
            registration = registry.register(TOOLS)
        except Err as error:
            raise Err(f"cannot register py_echo: {error.value}")
        # `{"forget_registration": true}` makes the common mistake on purpose
        # (the handle is not kept, so its tools close at once), for the test
        # that checks the host names it.
        if not json.loads(config or "null") == {"forget_registration": True}:
            _registration = registration

    def execute(self, tool, input, context) -> ToolResponse:
        # Every call runs in a fresh instance; nothing from activate is here.
        if tool != "py_echo":
            raise Err(ToolFailure(message=f'unknown tool "{tool}"; this plugin provides: py_echo', metadata=None))
        message = json.loads(input)["message"]
        return ToolResponse(
            output=json.dumps({"message": message}),
            content=[ContentPart_Text(message)],
            metadata=None,
        )
