//! The At operator: runs `spec.command` in a Pod `<name>-pod` once `spec.schedule` is
//! reached, moving the At through PENDING → RUNNING → DONE.

mod api;
mod decide;
mod reconcile;
mod schedule;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{Controller, watcher};
use operator_common::namespaces::api;
use operator_common::runner::{self, Runtime};
use operator_common::{CommonArgs, cli};

use crate::api::At;
use crate::reconcile::{Context, error_policy, reconcile};

const OPERATOR: &str = "at-operator";

#[derive(Parser, Debug)]
#[command(name = OPERATOR, version, about = "Runs commands in pods at scheduled times")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
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
    rt.check_access(|s| api::<At>(&client, s)).await?;
    rt.check_access(|s| api::<Pod>(&client, s)).await?;
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: rt.recorder.clone(),
    });
    let pods = watcher::Config::default().labels(decide::MANAGED_BY_SELECTOR);
    let controllers = rt.namespaces.scopes().into_iter().map(|scope| {
        let results = Controller::new(api::<At>(&client, &scope), watcher::Config::default())
            .owns(api::<Pod>(&client, &scope), pods.clone())
            .shutdown_on_signal()
            .run(reconcile, error_policy, ctx.clone());
        runner::drain("At", &rt.health, results)
    });
    rt.health.set_started();
    futures::future::join_all(controllers).await;
    rt.finish().await;
    tracing::info!("{OPERATOR} shut down");
    Ok(())
}
