//! The ptemplate operator: for each `Ptemplate` a KMM `Module` loading the `ptemplate_char_dev`
//! driver and a DaemonSet of consumer pods, both kept as the spec says.

mod api;
mod desired;
mod reconcile;
mod status;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DynamicObject;
use kube::runtime::{Controller, watcher};
use operator_common::namespaces::api;
use operator_common::runner::{self, Runtime};
use operator_common::{CommonArgs, cli};

use crate::api::{Ptemplate, module_resource};
use crate::desired::Images;
use crate::reconcile::{Context, error_policy, reconcile};

const OPERATOR: &str = "ptemplate-operator";

#[derive(Parser, Debug)]
#[command(name = OPERATOR, version, about = "Loads the ptemplate driver through KMM and runs its consumers")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Image of the kernel module, per kernel (KMM expands ${KERNEL_FULL_VERSION}).
    #[arg(
        long,
        env = "RELATED_IMAGE_KMOD",
        default_value = "quay.io/chrisp262/pt-char-dev:${KERNEL_FULL_VERSION}"
    )]
    kmod_image: String,
    /// Image of the device plugin KMM runs next to the module.
    #[arg(
        long,
        env = "RELATED_IMAGE_DEVICE_PLUGIN",
        default_value = "quay.io/chrisp262/pt-device-plugin:latest"
    )]
    device_plugin_image: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    cli::init_logs(args.common.log_format);
    runner::exit_code(OPERATOR, run(args).await)
}

fn modules(client: &kube::Client, scope: &Option<String>) -> Api<DynamicObject> {
    match scope {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &module_resource()),
        None => Api::all_with(client.clone(), &module_resource()),
    }
}

async fn run(args: Args) -> Result<(), runner::Error> {
    let rt = Runtime::start(OPERATOR, &args.common).await?;
    let client = rt.client.clone();
    rt.check_access(|s| api::<Ptemplate>(&client, s)).await?;
    rt.check_access(|s| api::<DaemonSet>(&client, s)).await?;
    rt.check_access(|s| api::<Pod>(&client, s)).await?;
    // A missing KMM CRD or permission stops the operator at start-up, naming it.
    rt.check_dynamic_access("modules.kmm.sigs.x-k8s.io", |s| modules(&client, s))
        .await?;
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: rt.recorder.clone(),
        images: Images {
            kmod: args.kmod_image,
            device_plugin: args.device_plugin_image,
        },
    });
    let children = watcher::Config::default().labels(desired::MANAGED_BY_SELECTOR);
    let controllers = rt.namespaces.scopes().into_iter().map(|scope| {
        let results = Controller::new(
            api::<Ptemplate>(&client, &scope),
            watcher::Config::default(),
        )
        .owns(api::<DaemonSet>(&client, &scope), children.clone())
        .owns_with(
            modules(&client, &scope),
            module_resource(),
            children.clone(),
        )
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx.clone());
        runner::drain("Ptemplate", &rt.health, results)
    });
    rt.health.set_started();
    futures::future::join_all(controllers).await;
    rt.finish().await;
    tracing::info!("{OPERATOR} shut down");
    Ok(())
}
