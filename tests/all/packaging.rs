//! The published crates (and the Code Mode interpreter) carry their own
//! copy of the WIT worlds, so they build outside this repository; `wit/`
//! stays the one source of truth.

use std::path::Path;

#[test]
fn the_crates_wit_copies_are_identical_to_wit() {
    let copies = [
        ("wit/v0.1/world.wit", "host/runtime/wit/v0.1/world.wit"),
        ("wit/v0.1/world.wit", "guest-sdk/wit/v0.1/world.wit"),
        ("wit/code/world.wit", "host/runtime/wit/code/world.wit"),
        ("wit/code/world.wit", "code-mode/wit/world.wit"),
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for (source, copy) in copies {
        let original = std::fs::read(root.join(source)).unwrap();
        let copied = std::fs::read(root.join(copy)).unwrap();
        assert!(
            copied == original,
            "{copy} differs from {source}: copy it again \
             (`cp {source} {copy}`) after changing the WIT"
        );
    }
}
