//! Gives the interpreter a 4 MiB stack (the default is 1 MiB): boa's
//! parser recurses deeply, up to 16 KiB per level of nesting (see
//! `MAX_NESTING`), and the stack lives in linear memory, where only the
//! pages a program touches cost anything.

fn main() {
    println!("cargo:rustc-link-arg=-zstack-size={}", 4 << 20);
}
