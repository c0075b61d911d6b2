//! What a result shows the model: bounded text (R16) and the full outputs
//! retained behind it.

pub(crate) mod preview;
pub(crate) mod retain;
