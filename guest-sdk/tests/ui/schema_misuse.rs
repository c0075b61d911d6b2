use toolhost_sdk::prelude::*;

#[input(strict)]
struct Strict {
    text: String,
}

#[output]
union Bits {
    int: u32,
    float: f32,
}

fn main() {}
