//! The Code Mode interpreter: runs one model-written program, as the body of
//! an async function, in boa. `tools.NAME(input)` starts a host call and
//! returns a promise; when the program has nothing left to run, the
//! interpreter waits for the next call to end and settles its promise.
//!
//! The component gets nothing from the host but the `host` interface (and
//! WASI with no grants, which the Rust standard library imports).

use std::cell::RefCell;
use std::collections::HashMap;

use boa_engine::builtins::promise::{PromiseState, ResolvingFunctions};
use boa_engine::error::TryNativeError;
use boa_engine::object::builtins::JsPromise;
use boa_engine::property::Attribute;
use boa_engine::{
    Context, JsError, JsNativeError, JsResult, JsValue, NativeFunction, Script, Source, js_string,
};

wit_bindgen::generate!({
    path: "wit",
    world: "interpreter",
});

use toolhost::code::host::{self, Outcome};

/// Nesting the interpreter allows, in frames: deep enough for real
/// programs, shallow enough to end runaway recursion with a RangeError
/// before the wasm stack overflows.
const RECURSION_LIMIT: usize = 400;

/// The line the wrapper adds before the program.
const PRELUDE_LINES: u32 = 1;

/// Brackets a program may nest: deeper than programs are written, and
/// within what the parser's recursion fits in both stacks: the linear
/// memory one (see build.rs) and wasmtime's 512 KiB native one, which
/// about 128 levels of nested arrow functions fill.
const MAX_NESTING: usize = 64;

thread_local! {
    /// The promises of calls in flight, by call number.
    static PENDING: RefCell<HashMap<u32, ResolvingFunctions>> = RefCell::new(HashMap::new());
}

struct Interpreter;

impl Guest for Interpreter {
    fn run(program: String, prelude: String) -> Result<String, RunError> {
        report_oversized_allocations();
        let mut context = Context::default();
        context
            .runtime_limits_mut()
            .set_recursion_limit(RECURSION_LIMIT);
        install_globals(&mut context).map_err(|e| uncaught(e, &mut context))?;
        context
            .eval(Source::from_bytes(prelude.as_bytes()))
            .map_err(|e| uncaught(e, &mut context))?;
        check_nesting(&program)?;
        let wrapped = format!("(async () => {{\n{program}\n}})()");
        let script = Script::parse(Source::from_bytes(wrapped.as_bytes()), None, &mut context)
            .map_err(|_| syntax_error(&wrapped))?;
        let value = script
            .evaluate(&mut context)
            .map_err(|e| uncaught(e, &mut context))?;
        let promise = value
            .as_promise()
            .expect("an async function returns a promise");
        settle(&promise, &mut context)
    }
}

/// Pages of a wasm32 linear memory's whole address space (4 GiB).
const ADDRESS_SPACE_PAGES: usize = 65536;

/// Makes an allocation too large to make end the program as what it is: a
/// request for more memory than it may have. Rust's `alloc` crate panics
/// (`capacity overflow`) when a buffer's size passes `isize::MAX`, 2 GiB
/// here, before the allocator is asked (`'x'.repeat(2 ** 28)` asks boa for
/// 2.4 GiB of string slices), so the host's memory limiter never sees it.
/// A panic raised inside that crate, rather than at a caller's location,
/// is such a failure: the hook then asks for the whole address space,
/// which passes any memory limit the host sets, so the host records the
/// limit as tripped and names it; the panic then ends the program.
fn report_oversized_allocations() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_alloc = info
            .location()
            .is_some_and(|at| at.file().contains("/library/alloc/src/"));
        if in_alloc {
            let used = core::arch::wasm32::memory_size(0);
            core::arch::wasm32::memory_grow(0, ADDRESS_SPACE_PAGES.saturating_sub(used));
        }
        report(info);
    }));
}

/// Runs jobs and feeds call outcomes in until the program's promise settles.
fn settle(promise: &JsPromise, context: &mut Context) -> Result<String, RunError> {
    loop {
        context.run_jobs().map_err(|e| uncaught(e, context))?;
        match promise.state() {
            PromiseState::Fulfilled(value) => return Ok(json_text(&value, context)),
            PromiseState::Rejected(error) => {
                return Err(uncaught(JsError::from_opaque(error), context));
            }
            PromiseState::Pending => {}
        }
        if PENDING.with_borrow(HashMap::is_empty) {
            return Err(RunError {
                message: "the program awaits a promise that can never settle \
                          (only tool calls settle promises here)"
                    .into(),
                line: None,
                column: None,
            });
        }
        let (id, outcome) = host::next();
        let Some(resolvers) = PENDING.with_borrow_mut(|p| p.remove(&id)) else {
            continue;
        };
        let settled = match outcome {
            Outcome::Value(text) => parse_json(&text, context)
                .and_then(|v| resolvers.resolve.call(&JsValue::undefined(), &[v], context)),
            Outcome::Error(message) => reject(&resolvers, message, context),
        };
        settled.map_err(|e| uncaught(e, context))?;
    }
}

/// `__toolhost_call(name, input)` and `console`.
fn install_globals(context: &mut Context) -> JsResult<()> {
    context.register_global_callable(
        js_string!("__toolhost_call"),
        2,
        NativeFunction::from_fn_ptr(call_tool),
    )?;
    let log = NativeFunction::from_fn_ptr(console_log).to_js_function(context.realm());
    let console = boa_engine::object::ObjectInitializer::new(context)
        .property(js_string!("log"), log.clone(), Attribute::all())
        .property(js_string!("info"), log.clone(), Attribute::all())
        .property(js_string!("warn"), log.clone(), Attribute::all())
        .property(js_string!("error"), log, Attribute::all())
        .build();
    context.register_global_property(js_string!("console"), console, Attribute::all())
}

/// Starts a host call and returns the promise its outcome settles.
fn call_tool(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let name = args
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string(context)?
        .to_std_string_escaped();
    let input = args.get(1).cloned().unwrap_or_default();
    let input = input.to_json(context)?.unwrap_or(serde_json::Value::Null);
    let (promise, resolvers) = JsPromise::new_pending(context);
    match host::start(&name, &input.to_string()) {
        Ok(id) => {
            PENDING.with_borrow_mut(|p| p.insert(id, resolvers));
        }
        Err(message) => {
            reject(&resolvers, message, context)?;
        }
    }
    Ok(promise.into())
}

/// Rejects a call's promise with an `Error` carrying `message`.
fn reject(
    resolvers: &ResolvingFunctions,
    message: String,
    context: &mut Context,
) -> JsResult<JsValue> {
    let error = JsError::from(JsNativeError::error().with_message(message));
    let error = error.into_opaque(context)?;
    resolvers
        .reject
        .call(&JsValue::undefined(), &[error], context)
}

/// `console.log(...)`: strings as they are, other values as JSON, joined
/// by spaces.
fn console_log(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let mut line = String::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        match arg.as_string() {
            Some(s) => line.push_str(&s.to_std_string_escaped()),
            None => line.push_str(&json_text(arg, context)),
        }
    }
    host::log(&line);
    Ok(JsValue::undefined())
}

/// A value as JSON text: `null` for what JSON cannot hold (undefined,
/// functions), the engine's display for what fails to convert (cycles).
fn json_text(value: &JsValue, context: &mut Context) -> String {
    match value.to_json(context) {
        Ok(Some(json)) => json.to_string(),
        Ok(None) => "null".into(),
        Err(_) => serde_json::Value::String(value.display().to_string()).to_string(),
    }
}

fn parse_json(text: &str, context: &mut Context) -> JsResult<JsValue> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        JsNativeError::syntax().with_message(format!("the host sent invalid JSON: {e}"))
    })?;
    JsValue::from_json(&json, context)
}

/// An exception nothing caught, as `Name: message`; or a limit of the
/// engine (such as the recursion limit), which programs cannot catch.
fn uncaught(error: JsError, context: &mut Context) -> RunError {
    let message = match error.try_native(context) {
        Ok(native) => format!("{}: {}", native.kind(), native.message()),
        Err(TryNativeError::EngineError { source }) => format!(
            "the program was stopped: {source} (the interpreter allows {RECURSION_LIMIT} nested calls)"
        ),
        Err(_) => match error.into_opaque(context) {
            Ok(value) => format!("Uncaught {}", json_text(&value, context)),
            Err(_) => "Uncaught exception".into(),
        },
    };
    RunError {
        message,
        line: None,
        column: None,
    }
}

/// The program's syntax error, found again by the parser itself so its
/// position is structured, and moved back past the wrapper's first line.
fn syntax_error(wrapped: &str) -> RunError {
    use boa_parser::error::Error;
    let mut interner = boa_engine::interner::Interner::default();
    let scope = boa_engine::ast::scope::Scope::new_global();
    let parsed = boa_parser::Parser::new(Source::from_bytes(wrapped.as_bytes()))
        .parse_script(&scope, &mut interner);
    let Err(error) = parsed else {
        return RunError {
            message: "SyntaxError: the program does not parse".into(),
            line: None,
            column: None,
        };
    };
    let (message, position) = match &error {
        Error::Expected {
            expected,
            found,
            span,
            ..
        } => (
            format!("expected {}, got '{found}'", expected.join(" or ")),
            Some(span.start()),
        ),
        Error::Unexpected {
            message,
            found,
            span,
        } => (
            format!("unexpected token '{found}', {message}"),
            Some(span.start()),
        ),
        Error::General { message, position } => (message.to_string(), Some(*position)),
        Error::Lex {
            err: boa_parser::lexer::Error::Syntax(message, position),
        } => (message.to_string(), Some(*position)),
        Error::AbruptEnd => ("unexpected end of the program".into(), None),
        other => (other.to_string(), None),
    };
    let line = position.map(|p| p.line_number().saturating_sub(PRELUDE_LINES).max(1));
    RunError {
        message: format!("SyntaxError: {message}"),
        line,
        column: position.map(|p| p.column_number()),
    }
}

/// Refuses a program whose brackets nest deeper than [`MAX_NESTING`],
/// before the parser's recursion could exhaust the stack. Strings and
/// comments are skipped and template literals are treated as strings, so
/// nesting inside `${…}` goes uncounted: such a program still cannot harm
/// the host, it ends as a stack-overflow defect instead of this error.
fn check_nesting(program: &str) -> Result<(), RunError> {
    let mut depth = 0usize;
    let (mut line, mut column) = (1u32, 0u32);
    let mut chars = program.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        column += 1;
        if c == '\n' {
            (line, column) = (line + 1, 0);
        }
        match quote {
            Some(_) if c == '\\' => {
                chars.next();
                column += 1;
            }
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' | '`' => quote = Some(c),
                '/' if chars.peek() == Some(&'/') => {
                    while chars.next_if(|&n| n != '\n').is_some() {}
                }
                '/' if chars.peek() == Some(&'*') => {
                    chars.next();
                    let mut last = ' ';
                    for n in chars.by_ref() {
                        if n == '\n' {
                            (line, column) = (line + 1, 0);
                        }
                        if last == '*' && n == '/' {
                            break;
                        }
                        last = n;
                    }
                }
                '(' | '[' | '{' => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(RunError {
                            message: format!(
                                "SyntaxError: brackets nest more than {MAX_NESTING} deep; flatten the program"
                            ),
                            line: Some(line),
                            column: Some(column),
                        });
                    }
                }
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    Ok(())
}

export!(Interpreter);
