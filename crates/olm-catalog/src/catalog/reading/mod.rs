//! Reading catalogs from disk: which files, each a stream of JSON or YAML documents, loaded
//! into the model, and a digest of the content read. Its one error is [`load::LoadError`].

pub mod digest;
mod error;
pub mod files;
mod ignore;
pub mod load;
pub mod stream;
