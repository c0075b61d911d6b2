//! A tool's description, from its doc comment.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Attribute, Expr, ExprLit, Lit, Meta};

/// One line of a doc comment: text, or an expression such as
/// `#[doc = include_str!("tool.md")]`, which only the compiler can expand.
enum Line {
    Text(String),
    Expr(Expr),
}

/// The doc comment as a `&'static str` expression, the way rustdoc reads it:
/// the indentation every line shares (the space after `///`) removed, blank
/// lines at either end dropped. `None` when there is no doc comment, or only
/// blank lines.
pub(crate) fn description(attrs: &[Attribute]) -> Option<TokenStream> {
    let mut lines = doc_lines(attrs);
    unindent(&mut lines);
    let is_blank = |line: &Line| matches!(line, Line::Text(text) if text.trim().is_empty());
    let first = lines.iter().position(|line| !is_blank(line))?;
    let last = lines.iter().rposition(|line| !is_blank(line))?;
    let lines = &lines[first..=last];
    let texts: Option<Vec<&str>> = lines
        .iter()
        .map(|line| match line {
            Line::Text(text) => Some(text.as_str()),
            Line::Expr(_) => None,
        })
        .collect();
    if let Some(texts) = texts {
        let text = texts.join("\n");
        return Some(quote!(#text));
    }
    let mut parts = lines.iter().map(|line| match line {
        Line::Text(text) => quote!(#text),
        Line::Expr(expr) => quote!(#expr),
    });
    // `a, "\n", b, "\n", c`: the first part, then a newline before each other.
    let first = parts.next();
    let newline = std::iter::repeat_n(quote!("\n"), lines.len() - 1);
    Some(quote!(::core::concat!(#first #(, #newline, #parts)*)))
}

/// The `#[doc]` attributes, one [`Line`] per line of text.
fn doc_lines(attrs: &[Attribute]) -> Vec<Line> {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("doc")) {
        // `#[doc(hidden)]` and the like are not text.
        let Meta::NameValue(doc) = &attr.meta else {
            continue;
        };
        match &doc.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(text),
                ..
            }) => {
                // `split`, not `lines`: an empty `///` line is a paragraph break.
                let text = text.value();
                lines.extend(
                    text.split('\n')
                        .map(|l| Line::Text(l.trim_end().to_owned())),
                );
            }
            expr => lines.push(Line::Expr(expr.clone())),
        }
    }
    lines
}

/// Removes the leading whitespace all non-blank text lines share.
fn unindent(lines: &mut [Line]) {
    let indent = lines
        .iter()
        .filter_map(|line| match line {
            Line::Text(text) if !text.trim().is_empty() => {
                Some(text.len() - text.trim_start().len())
            }
            _ => None,
        })
        .min()
        .unwrap_or(0);
    for line in lines {
        if let Line::Text(text) = line {
            // Blank lines may be shorter than the indentation.
            *text = text.get(indent..).unwrap_or("").to_owned();
        }
    }
}

#[cfg(test)]
mod tests {
    use syn::parse_quote;

    use super::*;

    fn describe(item: syn::ItemFn) -> Option<String> {
        description(&item.attrs).map(|tokens| tokens.to_string())
    }

    #[test]
    fn line_comments_lose_the_shared_indentation_and_blank_ends() {
        let item = parse_quote! {
            ///
            /// Count words.
            ///
            ///   Indented more.
            ///
            fn f() {}
        };
        assert_eq!(
            describe(item).as_deref(),
            Some(r#""Count words.\n\n  Indented more.""#)
        );
    }

    #[test]
    fn multi_line_attributes_split_into_lines() {
        let item = parse_quote! {
            #[doc = " First.\n Second.  \r\n"]
            fn f() {}
        };
        assert_eq!(describe(item).as_deref(), Some(r#""First.\nSecond.""#));
    }

    #[test]
    fn doc_expressions_are_left_to_concat() {
        let item = parse_quote! {
            /// Intro.
            #[doc = include_str!("more.md")]
            fn f() {}
        };
        assert_eq!(
            describe(item).as_deref(),
            Some(r#":: core :: concat ! ("Intro." , "\n" , include_str ! ("more.md"))"#)
        );
    }

    #[test]
    fn no_text_is_no_description() {
        let item = parse_quote! {
            ///
            #[doc(hidden)]
            fn f() {}
        };
        assert_eq!(describe(item), None);
        assert_eq!(
            describe(parse_quote!(
                fn f() {}
            )),
            None
        );
    }
}
