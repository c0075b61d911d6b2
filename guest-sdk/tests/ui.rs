//! The macros at compile time. Each `tests/ui/*.rs` is a mistake whose
//! errors must match its `.stderr`: they point at the author's code and say
//! what to write instead. Each `tests/ui/pass/*.rs` must compile (warnings
//! denied) and run. After changing a message, regenerate the expectations
//! with `TRYBUILD=overwrite cargo test -p toolhost-sdk --test ui` and review
//! the diff.

#[test]
fn mistakes_fail_at_the_authors_code_and_every_supported_form_compiles() {
    // One `TestCases`: trybuild builds all the cases in one project.
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    cases.pass("tests/ui/pass/*.rs");
}
