//! `#[input]` and `#[output]`: the serde and schemars derives a tool's types
//! need, through `toolhost_sdk`'s re-exports, so a plugin depends on
//! `toolhost-sdk` alone.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Attribute, Data, DeriveInput};

/// Which way a type crosses the boundary.
#[derive(Clone, Copy)]
pub(crate) enum Direction {
    /// From the model: deserialized.
    Input,
    /// To the host: serialized.
    Output,
}

impl Direction {
    fn attribute(self) -> &'static str {
        match self {
            Direction::Input => "input",
            Direction::Output => "output",
        }
    }

    fn derive(self) -> TokenStream {
        match self {
            Direction::Input => quote!(::toolhost_sdk::serde::Deserialize),
            Direction::Output => quote!(::toolhost_sdk::serde::Serialize),
        }
    }

    fn other(self) -> Self {
        match self {
            Direction::Input => Direction::Output,
            Direction::Output => Direction::Input,
        }
    }
}

pub(crate) fn expand(
    direction: Direction,
    args: TokenStream,
    item: TokenStream,
) -> syn::Result<TokenStream> {
    let attribute = direction.attribute();
    if !args.is_empty() {
        return Err(syn::Error::new_spanned(
            args,
            format!("#[{attribute}] takes no arguments"),
        ));
    }
    let mut item: DeriveInput = syn::parse2(item)?;
    if let Data::Union(_) = item.data {
        return Err(syn::Error::new(
            Span::call_site(),
            format!("#[{attribute}] applies to a struct or an enum, not a union"),
        ));
    }
    // A type used both ways carries both attributes. The first one to
    // expand derives for both, since `JsonSchema` may be derived only once.
    let mut derives = vec![direction.derive()];
    let other = direction.other();
    let before = item.attrs.len();
    item.attrs.retain(|attr| !is_ours(attr, other.attribute()));
    if item.attrs.len() < before {
        derives.push(other.derive());
    }
    // Before the item's own attributes, so its `#[serde(...)]` and
    // `#[schemars(...)]` follow the derives that read them.
    Ok(quote! {
        #[derive(#(#derives,)* ::toolhost_sdk::schemars::JsonSchema)]
        #[serde(crate = "::toolhost_sdk::serde")]
        // Otherwise schemars would take the path from `#[serde(crate)]`.
        #[schemars(crate = "::toolhost_sdk::schemars")]
        #item
    })
}

/// `#[name]`, `#[toolhost_sdk::name]` or `#[toolhost_sdk::prelude::name]`.
fn is_ours(attr: &Attribute, name: &str) -> bool {
    let segments = &attr.path().segments;
    let named = segments.last().is_some_and(|last| last.ident == name);
    named && (segments.len() == 1 || segments[0].ident == "toolhost_sdk")
}
