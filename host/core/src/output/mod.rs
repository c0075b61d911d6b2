//! What a result shows the model: bounded text (R16) and the full outputs
//! retained behind it.

pub mod preview;
pub mod retain;
