use std::path::PathBuf;

use anyhow::Context;

use crate::api;

#[derive(clap::Args, Debug)]
pub struct CrdsArgs {
    /// Write one file per CRD into this directory instead of printing them.
    #[arg(long, value_name = "DIR")]
    write: Option<PathBuf>,
}

pub fn run(args: CrdsArgs) -> anyhow::Result<()> {
    match args.write {
        None => {
            print!("{}", api::render_all_yaml());
            Ok(())
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for manifest in api::all_crds() {
                let path = dir.join(manifest.file_name);
                std::fs::write(&path, api::render_yaml(&manifest.crd))
                    .with_context(|| format!("writing {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
            Ok(())
        }
    }
}
