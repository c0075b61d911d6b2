//! `#[tool]` on a function.
//!
//! The function stays exactly as written, so it can be called and unit
//! tested like any other. Beside it comes a braced struct of the same name:
//! a braced struct lives only in the type namespace, so it does not clash
//! with the function (a unit struct would), and `plugin!([word_count])`
//! names it as a type. The struct implements `Tool` by calling the function.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, Ident, Item, ItemFn, LitStr, ReturnType, Type, TypeReference};

use crate::{doc, name};

/// The shape every tool function has, for error messages.
const SHAPE: &str = "fn NAME(input: INPUT, cx: &Context) -> ToolResult<OUTPUT> \
                     (the input and the context are optional)";

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let name = parse_args(args)?;
    let function = parse_function(item)?;
    let signature = Signature::of(&function)?;
    let ident = &function.sig.ident;
    let name = match name {
        Some(name) => checked_name(name.value(), name.span())?,
        None => checked_name(ident.unraw().to_string(), ident.span())?,
    };
    let Some(description) = doc::description(&function.attrs) else {
        return Err(syn::Error::new(
            ident.span(),
            format!(
                "the tool `{name}` has no description: add a doc comment above #[tool] \
                 saying what the tool does; the model reads it"
            ),
        ));
    };
    Ok(render(&function, &signature, &name, &description))
}

/// The only argument: `name = "..."`.
fn parse_args(args: TokenStream) -> syn::Result<Option<LitStr>> {
    let mut name: Option<LitStr> = None;
    let parser = syn::meta::parser(|meta| {
        if !meta.path.is_ident("name") {
            return Err(meta.error("unknown #[tool] argument; the only one is `name = \"...\"`"));
        }
        if name.is_some() {
            return Err(meta.error("`name` is given twice"));
        }
        name = Some(meta.value()?.parse()?);
        Ok(())
    });
    syn::parse::Parser::parse2(parser, args)?;
    Ok(name)
}

fn parse_function(item: TokenStream) -> syn::Result<ItemFn> {
    match syn::parse2::<Item>(item)? {
        Item::Fn(function) => Ok(function),
        // Underlines the `#[tool]` attribute.
        _ => Err(syn::Error::new(
            Span::call_site(),
            format!(
                "#[tool] applies to a function: {SHAPE}; \
                 for a type, implement `toolhost_sdk::Tool` instead"
            ),
        )),
    }
}

fn checked_name(name: String, span: Span) -> syn::Result<String> {
    match name::problem(&name) {
        Some(problem) => Err(syn::Error::new(span, problem)),
        None => Ok(name),
    }
}

/// What the function takes and returns.
struct Signature {
    input: Option<Type>,
    context: Option<TypeReference>,
    output: Type,
}

impl Signature {
    fn of(function: &ItemFn) -> syn::Result<Self> {
        let sig = &function.sig;
        let refuse = |spanned: &dyn ToTokens, what: &str| {
            Err(syn::Error::new_spanned(
                spanned,
                format!("a tool function cannot be {what}: {SHAPE}"),
            ))
        };
        if let Some(asyncness) = &sig.asyncness {
            return refuse(asyncness, "`async` (tools run synchronously)");
        }
        if let Some(unsafety) = &sig.unsafety {
            return refuse(unsafety, "`unsafe`");
        }
        if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
            return refuse(&sig.generics, "generic");
        }
        let (input, context) = parameters(sig)?;
        let ReturnType::Type(_, output) = &sig.output else {
            return Err(syn::Error::new_spanned(
                sig,
                format!("a tool function returns `ToolResult<OUTPUT>`: {SHAPE}"),
            ));
        };
        Ok(Self {
            input,
            context,
            output: (**output).clone(),
        })
    }
}

/// The input (any parameter that is not a reference) and then the context
/// (`&Context`), each optional, in that order.
fn parameters(sig: &syn::Signature) -> syn::Result<(Option<Type>, Option<TypeReference>)> {
    let mut input = None;
    let mut context: Option<TypeReference> = None;
    for arg in &sig.inputs {
        let ty = match arg {
            FnArg::Receiver(receiver) => {
                return Err(syn::Error::new_spanned(
                    receiver,
                    format!("a tool function takes no `self`: {SHAPE}"),
                ));
            }
            FnArg::Typed(typed) => &*typed.ty,
        };
        let misplaced = |what: &str| Err(syn::Error::new_spanned(ty, format!("{what}: {SHAPE}")));
        match ty {
            Type::Reference(reference) if reference.mutability.is_some() => {
                return misplaced("the context is a shared reference, `&Context`");
            }
            Type::Reference(_) if context.is_some() => {
                return misplaced("a tool function takes one context");
            }
            Type::Reference(reference) => context = Some(reference.clone()),
            _ if context.is_some() => {
                return misplaced("the input comes before the context");
            }
            _ if input.is_some() => {
                return misplaced(
                    "a tool function takes one input; put its fields in one #[input] struct",
                );
            }
            _ => input = Some(ty.clone()),
        }
    }
    Ok((input, context))
}

fn render(
    function: &ItemFn,
    signature: &Signature,
    name: &str,
    description: &TokenStream,
) -> TokenStream {
    let ident = &function.sig.ident;
    let vis = &function.vis;
    // The struct shows up in rustdoc (and in `missing_docs`) as the tool.
    let docs = attributes(&function.attrs, "doc");
    // Whatever compiles the function out compiles the tool out too.
    let cfgs = attributes(&function.attrs, "cfg");
    let input_type = match &signature.input {
        // The author's tokens keep their spans: a type without `#[input]`
        // is reported there.
        Some(ty) => quote!(#ty),
        None => quote!(::toolhost_sdk::NoInput),
    };
    let output = &signature.output;
    let call = call(ident, signature);
    // Spanned at the author's return type: a wrong return or output type
    // is reported there, and rustc merges the errors that repeat.
    let implementation = quote_spanned! {output.span()=>
        #(#cfgs)*
        impl ::toolhost_sdk::Tool for #ident {
            const NAME: &'static str = #name;
            const DESCRIPTION: &'static str = #description;
            type Input = #input_type;
            type Output = <#output as ::toolhost_sdk::__private::ToolReturn>::Output;

            fn execute(
                input: <Self as ::toolhost_sdk::Tool>::Input,
                cx: &::toolhost_sdk::Context,
            ) -> ::toolhost_sdk::ToolResult<<Self as ::toolhost_sdk::Tool>::Output> {
                #call
            }
        }
    };
    quote! {
        #function

        #(#docs)*
        #(#cfgs)*
        #[allow(non_camel_case_types)]
        #[derive(Debug)]
        #vis struct #ident {}

        #implementation
    }
}

/// The call of the author's function, passing what it takes.
fn call(ident: &Ident, signature: &Signature) -> TokenStream {
    let input = signature.input.as_ref().map(|_| quote!(input));
    // Spanned at the author's `&Context`, so a wrong context type is
    // reported there.
    let context = signature
        .context
        .as_ref()
        .map(|ty| quote_spanned!(ty.span()=> cx));
    let unused = [
        signature.input.is_none().then(|| quote!(input)),
        signature.context.is_none().then(|| quote!(cx)),
    ];
    let unused = unused.iter().flatten();
    let args = input.into_iter().chain(context);
    let output = &signature.output;
    // The function's name, spanned like the rest at the return type.
    let mut callee = ident.clone();
    callee.set_span(output.span());
    quote_spanned! {output.span()=>
        #(let _ = #unused;)*
        ::toolhost_sdk::__private::ToolReturn::into_result(#callee(#(#args),*))
    }
}

fn attributes<'a>(attrs: &'a [Attribute], name: &str) -> Vec<&'a Attribute> {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident(name))
        .collect()
}
