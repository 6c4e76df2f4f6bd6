//! A stand-in for the Kernel Module Management operator, the dependency of ptemplate in our
//! catalog: KMM's own manager builds and loads kernel modules, which no test node here can
//! do. This one runs as the bundle's Deployment does (probes, `--leader-elect`, the CSV's
//! RBAC) and writes each Module's status as KMM would where nothing is loaded: how many nodes
//! its selector matches, none desired or available.

mod status;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use operator_common::runner::{self, Runtime};
use operator_common::{CommonArgs, cli};
use serde_json::json;

const OPERATOR: &str = "kernel-module-management-operator";

#[derive(Parser, Debug)]
#[command(name = OPERATOR, version, about = "Reports the nodes each KMM Module selects (a stand-in: loads nothing)")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("Module {object}: writing status: {source}")]
    Status {
        object: String,
        #[source]
        source: kube::Error,
    },
}

struct Context {
    client: Client,
    nodes: Store<Node>,
}

fn module_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kmm.sigs.x-k8s.io", "v1beta1", "Module"),
        "modules",
    )
}

fn modules(client: &Client, scope: &Option<String>) -> Api<DynamicObject> {
    match scope {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &module_resource()),
        None => Api::all_with(client.clone(), &module_resource()),
    }
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
    rt.check_access(|_| Api::<Node>::all(client.clone()))
        .await?;
    rt.check_dynamic_access("modules.kmm.sigs.x-k8s.io", |s| modules(&client, s))
        .await?;
    let (nodes, writer) = reflector::store();
    let ctx = Arc::new(Context {
        client: client.clone(),
        nodes,
    });
    // OwnNamespace or AllNamespaces (the CSV's install modes): one scope. A node that comes,
    // goes or is relabelled changes every Module's count.
    let scope = rt.namespaces.scopes().into_iter().next().flatten();
    let node_changes = reflector::reflector(
        writer,
        watcher(Api::<Node>::all(client.clone()), watcher::Config::default()),
    )
    .touched_objects()
    .map(|_| ());
    let results = Controller::new_with(
        modules(&client, &scope),
        watcher::Config::default(),
        module_resource(),
    )
    .reconcile_all_on(node_changes)
    .shutdown_on_signal()
    .run(reconcile, error_policy, ctx);
    rt.health.set_started();
    runner::drain("Module", &rt.health, results).await;
    rt.finish().await;
    tracing::info!("{OPERATOR} shut down");
    Ok(())
}

async fn reconcile(module: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let spec = serde_json::to_value(&module.data).unwrap_or_default();
    let matching = status::matching(
        &status::selector(&spec),
        ctx.nodes.state().iter().map(|n| &**n),
    );
    let next = status::desired(matching);
    if spec.get("status") != Some(&next) {
        let namespace = module.namespace().unwrap_or_default();
        let patch = json!({
            "apiVersion": "kmm.sigs.x-k8s.io/v1beta1",
            "kind": "Module",
            "status": next,
        });
        Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &namespace, &module_resource())
            .patch_status(
                &module.name_any(),
                &PatchParams::apply(OPERATOR).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|source| Error::Status {
                object: format!("{namespace}/{}", module.name_any()),
                source,
            })?;
    }
    Ok(Action::await_change())
}

fn error_policy(_module: Arc<DynamicObject>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}
