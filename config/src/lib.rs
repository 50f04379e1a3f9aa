//! Configuration of the edge gateway: one TOML file, parsed into raw serde structs, then
//! converted once into the validated [`model::Config`].

pub mod model;

pub use model::*;
