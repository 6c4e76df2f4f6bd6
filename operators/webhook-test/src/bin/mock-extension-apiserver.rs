//! The mock extension API server of upstream's e2e specs, ours: see
//! [`webhook_test_operator::mock`].

use std::process::ExitCode;

use webhook_test_operator::{mock, tls};

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("{0}")]
    Args(#[from] mock::ArgsError),
    #[error("{0}")]
    Tls(#[from] tls::TlsError),
}

#[tokio::main]
async fn main() -> ExitCode {
    webhook_test_operator::main("mock-extension-apiserver", run()).await
}

async fn run() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = mock::parse(&args)?;
    tracing::info!(group = %args.group, version = %args.version, kinds = ?args.kinds, "serving");
    let files = tls::Files::api_service(&args.cert_dir);
    tls::listen(args.port, files, mock::router(&args))
        .await?
        .await;
    Ok(())
}
