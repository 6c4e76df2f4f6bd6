//! The Reverse Words operator: for each `ReverseWordsApp` a Deployment `dp-<name>` running
//! the Reverse Words application and a Service `service-<name>` on port 8080.

mod api;
mod desired;
mod reconcile;
mod status;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::runtime::{Controller, watcher};
use operator_common::namespaces::api;
use operator_common::runner::{self, Runtime};
use operator_common::{CommonArgs, cli};

use crate::api::ReverseWordsApp;
use crate::reconcile::{Context, error_policy, reconcile};

const OPERATOR: &str = "reverse-words-operator";

#[derive(Parser, Debug)]
#[command(name = OPERATOR, version, about = "Deploys Reverse Words applications")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Image of the Reverse Words application; `spec.appVersion` replaces its tag.
    #[arg(long, env = "RELATED_IMAGE_REVERSE_WORDS_APP", default_value = concat!("quay.io/olm-rs/reverse-words-app:v", env!("CARGO_PKG_VERSION")))]
    app_image: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    cli::init_logs(args.common.log_format);
    runner::exit_code(OPERATOR, run(args).await)
}

async fn run(args: Args) -> Result<(), runner::Error> {
    let rt = Runtime::start(OPERATOR, &args.common).await?;
    let client = rt.client.clone();
    rt.check_access(|s| api::<ReverseWordsApp>(&client, s))
        .await?;
    rt.check_access(|s| api::<Deployment>(&client, s)).await?;
    rt.check_access(|s| api::<Service>(&client, s)).await?;
    rt.check_access(|s| api::<Pod>(&client, s)).await?;
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: rt.recorder.clone(),
        app_image: args.app_image,
    });
    let children = watcher::Config::default().labels(desired::MANAGED_BY_SELECTOR);
    let controllers = rt.namespaces.scopes().into_iter().map(|scope| {
        let results = Controller::new(
            api::<ReverseWordsApp>(&client, &scope),
            watcher::Config::default(),
        )
        .owns(api::<Deployment>(&client, &scope), children.clone())
        .owns(api::<Service>(&client, &scope), children.clone())
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx.clone());
        runner::drain("ReverseWordsApp", &rt.health, results)
    });
    rt.health.set_started();
    futures::future::join_all(controllers).await;
    rt.finish().await;
    tracing::info!("{OPERATOR} shut down");
    Ok(())
}
