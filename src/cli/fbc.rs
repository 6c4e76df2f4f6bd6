//! File-based catalogs as the commands write them, below both `olm catalog` and the image
//! builders that write a catalog into an image.

use std::io::Write;

use crate::catalog::DeclarativeConfig;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FbcFormat {
    Json,
    Yaml,
}

/// Writes FBC as `opm render` does: a stream of JSON objects, or YAML documents.
pub fn write_fbc(
    config: &DeclarativeConfig,
    format: FbcFormat,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    match format {
        // Straight into the writer: a bundle's objects are most of the output.
        FbcFormat::Json => {
            for blob in config.blobs() {
                serde_json::to_writer_pretty(&mut *out, &blob)?;
                out.write_all(b"\n")?;
            }
        }
        FbcFormat::Yaml => {
            for blob in config.to_blobs() {
                write!(out, "---\n{}", serde_yaml::to_string(&blob)?)?;
            }
        }
    }
    Ok(())
}
