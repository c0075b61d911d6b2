//! The interpreter, compiled on a thread of its own from the moment the
//! host is built: nothing waits for it but a program that runs before it
//! is ready, so a server answers its clients while it compiles.

use std::sync::Arc;

use tokio::sync::watch;

use crate::error::Error;
use crate::wasm::code::interpreter::Interpreter;
use crate::wasm::engine::Runtime;

/// The interpreter once compiled, or why it could not be.
type Compiled = Option<Result<Arc<Interpreter>, String>>;

/// The interpreter compiling in the background, then ready (or failed).
#[allow(missing_debug_implementations)] // a channel, nothing to show
pub struct Compiling {
    ready: watch::Receiver<Compiled>,
}

impl Compiling {
    /// Starts compiling `wasm` (or loading it from the compile cache).
    pub fn start(runtime: Arc<Runtime>, wasm: Vec<u8>) -> Result<Compiling, Error> {
        let (done, ready) = watch::channel(None);
        std::thread::Builder::new()
            .name("toolhost-code-mode".into())
            .spawn(move || {
                let compiled = Interpreter::new(&runtime, &wasm)
                    .map(Arc::new)
                    .map_err(|e| e.to_string());
                let _ = done.send(Some(compiled));
            })
            .map_err(|e| Error::Interpreter {
                reason: format!("cannot start a thread to compile it: {e}"),
            })?;
        Ok(Compiling { ready })
    }

    /// Whether compiling has ended (ready, or failed).
    pub fn is_done(&self) -> bool {
        self.ready.borrow().is_some()
    }

    /// The interpreter, once it is ready.
    pub async fn get(&self) -> Result<Arc<Interpreter>, String> {
        let mut ready = self.ready.clone();
        match ready.wait_for(Option::is_some).await {
            Ok(compiled) => compiled.clone().expect("waited until it is set"),
            Err(_) => Err("its compiling thread ended without a result".into()),
        }
    }
}
