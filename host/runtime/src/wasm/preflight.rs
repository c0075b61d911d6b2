//! What a component needs from its host, read from its binary before it is
//! compiled: a plugin that imports what the host does not link, or that needs
//! the component-model async ABI, is refused in microseconds with a message
//! naming each item, instead of after a compile that can take many seconds.

use std::path::Path;

use wasmparser::{CanonicalFunction as Canon, CanonicalOption, Parser, Payload};

use crate::error::{LoadError, Unsupported};
use crate::wasm::bindings::{KEPT, WIT_PACKAGE, WIT_VERSION};

/// Every interface the linker provides (see `imports::add_to_linker`), as
/// `package/interface`; any 0.2.x version of a WASI interface links, and any
/// kept version of ours. A test checks each one links.
pub(crate) const LINKED: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:filesystem/preopens",
    "wasi:filesystem/types",
    "wasi:http/outgoing-handler",
    "wasi:http/types",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:random/random",
    "wasi:sockets/instance-network",
    "wasi:sockets/ip-name-lookup",
    "wasi:sockets/network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "toolhost:plugin/call",
    "toolhost:plugin/registry",
    "toolhost:plugin/types",
];

/// The WASI 0.2 packages; an interface of one that is not in [`LINKED`] is
/// one Toolhost deliberately leaves out (an unstable or server-side one).
const WASI_02_PACKAGES: &[&str] = &[
    "wasi:cli",
    "wasi:clocks",
    "wasi:filesystem",
    "wasi:http",
    "wasi:io",
    "wasi:random",
    "wasi:sockets",
];

/// The top-level imports and exports and the async built-ins of a component.
#[derive(Debug, Default)]
struct Needs {
    imports: Vec<String>,
    exports: Vec<String>,
    async_abi: Vec<&'static str>,
}

/// Refuses, before compiling, a component that needs what the host does not
/// provide, or that is not built for a version of the plugin world the host
/// keeps.
pub(crate) fn preflight(path: &Path, wasm: &[u8]) -> Result<(), LoadError> {
    let needs = scan(wasm).map_err(|e| LoadError::Invalid {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    check_version(path, &needs)?;
    let mut unsupported: Vec<Unsupported> =
        needs.imports.iter().filter_map(|i| classify(i)).collect();
    unsupported.extend(needs.async_abi.iter().map(|b| Unsupported::AsyncAbi(b)));
    if !unsupported.is_empty() {
        return Err(LoadError::Unsupported {
            path: path.to_owned(),
            hint: hint(&unsupported),
            needs: unsupported,
        });
    }
    check_export(path, &needs)
}

/// Walks the binary once. Imports and exports count at the top level only
/// (nested components' are satisfied inside the component); async built-ins
/// count anywhere.
fn scan(wasm: &[u8]) -> wasmparser::Result<Needs> {
    let mut needs = Needs::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    needs.imports.push(import?.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    needs.exports.push(export?.name.name.to_owned());
                }
            }
            Payload::ComponentCanonicalSection(reader) => {
                for function in reader {
                    if let Some(builtin) = async_builtin(&function?)
                        && !needs.async_abi.contains(&builtin)
                    {
                        needs.async_abi.push(builtin);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(needs)
}

/// The built-in a canonical function needs from the component-model async
/// ABI (or threads), which this host's engine does not enable.
fn async_builtin(function: &Canon) -> Option<&'static str> {
    Some(match function {
        Canon::Lift { options, .. } | Canon::Lower { options, .. } => {
            let is_async = |o: &CanonicalOption| {
                matches!(o, CanonicalOption::Async | CanonicalOption::Callback(_))
            };
            return options.iter().any(is_async).then_some("async lift/lower");
        }
        Canon::TaskReturn { .. } => "task.return",
        Canon::TaskCancel => "task.cancel",
        Canon::ContextGet { .. } | Canon::ContextSet { .. } => "context.get/set",
        Canon::BackpressureInc | Canon::BackpressureDec => "backpressure",
        Canon::ThreadYield { .. } => "thread.yield",
        Canon::SubtaskDrop | Canon::SubtaskCancel { .. } => "subtask",
        Canon::StreamNew { .. }
        | Canon::StreamRead { .. }
        | Canon::StreamWrite { .. }
        | Canon::StreamCancelRead { .. }
        | Canon::StreamCancelWrite { .. }
        | Canon::StreamDropReadable { .. }
        | Canon::StreamDropWritable { .. } => "stream",
        Canon::FutureNew { .. }
        | Canon::FutureRead { .. }
        | Canon::FutureWrite { .. }
        | Canon::FutureCancelRead { .. }
        | Canon::FutureCancelWrite { .. }
        | Canon::FutureDropReadable { .. }
        | Canon::FutureDropWritable { .. } => "future",
        Canon::ErrorContextNew { .. }
        | Canon::ErrorContextDebugMessage { .. }
        | Canon::ErrorContextDrop => "error-context",
        Canon::WaitableSetNew
        | Canon::WaitableSetWait { .. }
        | Canon::WaitableSetPoll { .. }
        | Canon::WaitableSetDrop
        | Canon::WaitableJoin => "waitable-set",
        Canon::ThreadSpawnRef { .. }
        | Canon::ThreadSpawnIndirect { .. }
        | Canon::ThreadAvailableParallelism
        | Canon::ThreadIndex
        | Canon::ThreadNewIndirect { .. }
        | Canon::ThreadResumeLater
        | Canon::ThreadSuspend { .. }
        | Canon::ThreadSuspendThenResume { .. }
        | Canon::ThreadYieldThenResume { .. }
        | Canon::ThreadSuspendThenPromote { .. }
        | Canon::ThreadYieldThenPromote { .. } => "threads",
        _ => return None,
    })
}

/// Why the host does not link `import`, or `None` when it does.
fn classify(import: &str) -> Option<Unsupported> {
    let (interface, version) = import.split_once('@').unwrap_or((import, ""));
    let package = interface.split_once('/').map_or(interface, |(p, _)| p);
    let major_minor = version.split('.').take(2).collect::<Vec<_>>().join(".");
    let linked = LINKED.contains(&interface)
        && match package {
            WIT_PACKAGE => true, // its version is checked first
            _ => major_minor == "0.2",
        };
    if linked {
        return None;
    }
    Some(if package.starts_with("wasi:") && major_minor == "0.3" {
        Unsupported::Wasi03(import.to_owned())
    } else if WASI_02_PACKAGES.contains(&package) && major_minor == "0.2" {
        Unsupported::WasiInterface(import.to_owned())
    } else {
        Unsupported::Import(import.to_owned())
    })
}

/// Every `toolhost:plugin` interface, imported or exported, must be of one
/// kept version (its major.minor): checked first, so an old or future
/// plugin, or one mixing versions, gets that message.
fn check_version(path: &Path, needs: &Needs) -> Result<(), LoadError> {
    let prefix = format!("{WIT_PACKAGE}/");
    let mut built_for = None;
    for name in needs.imports.iter().chain(&needs.exports) {
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        let version = rest.split_once('@').map_or("", |(_, v)| v);
        let kept = KEPT.iter().copied().find(|kept| {
            version
                .strip_prefix(kept)
                .is_some_and(|patch| patch.starts_with('.'))
        });
        match (kept, built_for) {
            (Some(kept), None) => built_for = Some(kept),
            (Some(kept), Some(first)) if kept == first => {}
            _ => {
                return Err(LoadError::IncompatibleVersion {
                    path: path.to_owned(),
                    found: name.clone(),
                    expected: WIT_VERSION,
                });
            }
        }
    }
    Ok(())
}

/// The component must export the `plugin` interface of our world.
fn check_export(path: &Path, needs: &Needs) -> Result<(), LoadError> {
    let plugin = format!("{WIT_PACKAGE}/plugin@");
    if needs.exports.iter().any(|e| e.starts_with(&plugin)) {
        return Ok(());
    }
    Err(LoadError::WrongWorld {
        path: path.to_owned(),
        exports: if needs.exports.is_empty() {
            "nothing".into()
        } else {
            needs.exports.join(", ")
        },
    })
}

/// What to change in the build when the component needs the async ABI.
fn hint(unsupported: &[Unsupported]) -> Option<String> {
    let needs_async = unsupported
        .iter()
        .any(|u| matches!(u, Unsupported::AsyncAbi(_) | Unsupported::Wasi03(_)));
    // The producers section does not say which JavaScript engine built a
    // component (jco's QuickJS backend records only wit-component), so the
    // hint names the fix for each toolchain known to emit the async ABI.
    needs_async.then(|| {
        "build for WASI 0.2 without the component-model async ABI: Rust \
         `wasm32-wasip2` with no `async` functions in the bindings; jco's QuickJS \
         backend with `--backend-qjs-disable-async`"
            .into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::engine::Runtime;
    use crate::wasm::store::StoreState;
    use wasmtime::StoreContextMut;
    use wasmtime::component::Linker;

    /// The exact version at which the host's linker defines `interface`, if
    /// any: defining a function under a name the linker already has fails.
    fn linked_version(
        linker: &mut Linker<StoreState>,
        interface: &str,
        major_minor: &str,
    ) -> Option<String> {
        (0..=64)
            .map(|patch| format!("{interface}@{major_minor}.{patch}"))
            .find(|name| {
                let probe = |_: StoreContextMut<'_, StoreState>, (): ()| Ok(());
                linker.root().func_wrap(name, probe).is_err()
            })
    }

    /// Every interface [`LINKED`] names is defined by the host's linker, and
    /// WASI 0.2 interfaces it leaves out are not.
    #[test]
    fn every_listed_interface_is_linked() {
        let runtime = Runtime::new(4, None, None, false).unwrap();
        let mut linker = Linker::new(&runtime.optimized.engine);
        crate::wasm::imports::add_to_linker(&mut linker).unwrap();
        for interface in LINKED {
            let major_minor = if interface.starts_with(WIT_PACKAGE) {
                KEPT[0]
            } else {
                "0.2"
            };
            let version = linked_version(&mut linker, interface, major_minor);
            let Some(name) = version else {
                panic!("{interface} is listed in LINKED but the linker does not define it");
            };
            assert!(classify(&name).is_none(), "{name} is refused");
        }
        for interface in ["wasi:clocks/timezone", "wasi:http/incoming-handler"] {
            let version = linked_version(&mut linker, interface, "0.2");
            assert_eq!(version, None, "{interface} is linked: list it in LINKED");
            assert!(matches!(
                classify(&format!("{interface}@0.2.0")),
                Some(Unsupported::WasiInterface(_))
            ));
        }
    }

    /// What [`check_version`] says of a plugin exporting `plugin` and
    /// importing `imports`.
    fn version_check(plugin: &str, imports: &[&str]) -> Result<(), String> {
        let needs = Needs {
            imports: imports.iter().map(|i| i.to_string()).collect(),
            exports: vec![plugin.to_owned()],
            async_abi: Vec::new(),
        };
        check_version(Path::new("p.wasm"), &needs).map_err(|e| match e {
            LoadError::IncompatibleVersion { found, .. } => found,
            other => panic!("{other:?}"),
        })
    }

    #[test]
    fn each_kept_version_loads_and_others_are_refused_naming_the_interface() {
        for kept in KEPT {
            let plugin = format!("toolhost:plugin/plugin@{kept}.0");
            let call = format!("toolhost:plugin/call@{kept}.3");
            assert_eq!(
                version_check(&plugin, &[&call, "wasi:io/streams@0.2.3"]),
                Ok(())
            );
        }
        let unknown = [
            "toolhost:plugin/plugin@0.0.1",
            "toolhost:plugin/plugin@9.1.0",
        ];
        for plugin in unknown {
            assert_eq!(version_check(plugin, &[]), Err(plugin.to_owned()));
        }
        // `0.10` is not `0.1`; no version is no version.
        for plugin in ["toolhost:plugin/plugin@0.10.0", "toolhost:plugin/plugin"] {
            assert_eq!(version_check(plugin, &[]), Err(plugin.to_owned()));
        }
        // One plugin, one world: an interface of another version is refused.
        let mixed = "toolhost:plugin/call@9.9.0";
        assert_eq!(
            version_check("toolhost:plugin/plugin@0.1.0", &[mixed]),
            Err(mixed.to_owned())
        );
    }

    #[test]
    fn imports_are_classified() {
        assert!(matches!(
            classify("wasi:cli/environment@0.3.0"),
            Some(Unsupported::Wasi03(_))
        ));
        assert!(matches!(
            classify("wasi:keyvalue/store@0.2.0-draft"),
            Some(Unsupported::Import(_))
        ));
        assert!(matches!(
            classify("wasi:cli/environment"),
            Some(Unsupported::Import(_))
        ));
        assert!(matches!(classify("log"), Some(Unsupported::Import(_))));
        assert_eq!(classify("wasi:io/streams@0.2.3"), None);
    }
}
