//! The published crates carry their own copy of the WIT world, so they build
//! outside this repository; `wit/` stays the one source of truth.

use std::path::Path;

#[test]
fn the_crates_wit_copies_are_identical_to_wit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let source = std::fs::read(root.join("wit/world.wit")).unwrap();
    for copy in ["host/wit/world.wit", "guest-sdk/wit/world.wit"] {
        let copied = std::fs::read(root.join(copy)).unwrap();
        assert!(
            copied == source,
            "{copy} differs from wit/world.wit: copy it again \
             (`cp wit/world.wit {copy}`) after changing the WIT"
        );
    }
}
