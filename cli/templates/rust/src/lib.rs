//! {{name}}: a Toolhost plugin with one example tool, `greet`.

use toolhost_sdk::prelude::*;

/// The arguments of `greet`. The doc comments on the fields become the
/// input schema's descriptions, which the model reads.
#[input]
pub struct GreetInput {
    /// Who to greet.
    pub name: String,
    /// End with an exclamation mark.
    #[serde(default)]
    pub excited: bool,
}

/// The result of `greet`. The host checks it against the derived schema.
#[output]
pub struct GreetOutput {
    /// The greeting.
    pub greeting: String,
}

/// Greet someone by name.
#[tool]
pub fn greet(input: GreetInput) -> ToolResult<GreetOutput> {
    let name = input.name.trim();
    if name.is_empty() {
        // An error the model sees: say how to fix the call.
        return Err("`name` is blank: give the name of the person to greet.".into());
    }
    let greeting = format!("Hello, {name}{}", if input.excited { "!" } else { "." });
    // The model reads the text; the output is the machine value.
    Ok(Response::new(GreetOutput {
        greeting: greeting.clone(),
    })
    .with_text(greeting))
}

// Every tool of the plugin.
toolhost_sdk::plugin!([greet]);
