//! Example Toolhost plugin with three small text tools: `echo`, `word_count`
//! and `regex_search`, written with `#[tool]`. It shows typed input and
//! output, content next to output, and turning bad input into a
//! model-visible [`ToolError`].

use regex::Regex;
use toolhost_sdk::prelude::*;

/// The arguments of `echo`.
#[input]
pub struct EchoInput {
    /// The message to repeat.
    pub message: String,
}

/// The result of `echo`.
#[output]
pub struct EchoOutput {
    /// The message, unchanged.
    pub message: String,
}

/// Repeat a message back unchanged.
#[tool]
pub fn echo(input: EchoInput) -> ToolResult<EchoOutput> {
    // The model sees the plain message rather than the output's JSON.
    let text = input.message.clone();
    Ok(Response::new(EchoOutput {
        message: input.message,
    })
    .with_text(text))
}

/// The arguments of `word_count`.
#[input]
pub struct WordCountInput {
    /// The text to count.
    pub text: String,
}

/// The counts of `word_count`.
#[output]
pub struct WordCountOutput {
    /// Runs of non-whitespace characters.
    pub words: u64,
    /// Lines; a final line without a newline counts too.
    pub lines: u64,
    /// UTF-8 bytes.
    pub bytes: u64,
}

/// Count the words, lines and bytes of a text.
#[tool]
pub fn word_count(input: WordCountInput) -> ToolResult<WordCountOutput> {
    let text = input.text;
    // No content: the host shows the output JSON to the model.
    Ok(WordCountOutput {
        words: text.split_whitespace().count() as u64,
        lines: text.lines().count() as u64,
        bytes: text.len() as u64,
    }
    .into())
}

/// The arguments of `regex_search`.
#[input]
pub struct RegexSearchInput {
    /// The text to search.
    pub text: String,
    /// A regular expression in Rust `regex` syntax (no look-around or
    /// backreferences). `(?m)` makes `^` and `$` match at line boundaries.
    pub pattern: String,
}

/// The matches of `regex_search`, in order.
#[output]
pub struct RegexSearchOutput {
    /// Every non-overlapping match, in order.
    pub matches: Vec<Match>,
}

/// One match.
#[output]
pub struct Match {
    /// The 1-based line on which the match starts.
    pub line: u64,
    /// The matched text.
    pub text: String,
}

/// Find every match of a regular expression in a text, with 1-based line numbers.
#[tool]
pub fn regex_search(input: RegexSearchInput) -> ToolResult<RegexSearchOutput> {
    let regex = Regex::new(&input.pattern).map_err(|error| {
        format!(
            "invalid regular expression {:?}: {error}\n\
             Fix the pattern (Rust regex syntax: no look-around or backreferences) and try again.",
            input.pattern
        )
    })?;
    // Count newlines incrementally: matches come in order.
    let (mut line, mut scanned) = (1, 0);
    let matches = regex
        .find_iter(&input.text)
        .map(|found| {
            line += input.text[scanned..found.start()].matches('\n').count() as u64;
            scanned = found.start();
            Match {
                line,
                text: found.as_str().to_owned(),
            }
        })
        .collect();
    Ok(RegexSearchOutput { matches }.into())
}

toolhost_sdk::plugin!([echo, word_count, regex_search]);
