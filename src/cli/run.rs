//! `olm run`: the controller process.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use crate::controllers::context::Settings;
use crate::runtime::leader::LeaseConfig;
use crate::runtime::{RunConfig, default_identity};

/// `--packages-address`: where the packagemanifests API listens, or nowhere (`off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackagesAddress(pub Option<SocketAddr>);

fn parse_packages_address(text: &str) -> Result<PackagesAddress, String> {
    match text.trim() {
        "off" | "" => Ok(PackagesAddress(None)),
        address => address
            .parse()
            .map(|a| PackagesAddress(Some(a)))
            .map_err(|e| format!("{address:?} is neither HOST:PORT nor `off`: {e}")),
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::api::duration::parse_go_duration(text).map_err(|e| e.to_string())
}

/// A Go duration, or whole days (`730d`): certificates outlive Go's longest duration flag.
fn parse_validity(text: &str) -> Result<Duration, String> {
    match text.strip_suffix('d').map(str::parse::<u64>) {
        Some(Ok(days)) if days > 0 => Ok(Duration::from_secs(days * 24 * 3600)),
        Some(_) => Err(format!("{text:?} is not a whole number of days")),
        None => parse_duration(text),
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Where /healthz and /readyz are served, and /metrics and /debug/catalogs too when the
    /// address is a loopback one (off the host they need `--secure-admin-address`).
    #[arg(long, default_value = "127.0.0.1:8080", env = "OLM_ADMIN_ADDRESS")]
    pub admin_address: SocketAddr,
    /// Where /metrics and /debug/catalogs are served over TLS to callers with a bearer
    /// token allowed the path (TokenReview and SubjectAccessReview); off by default.
    #[arg(long, env = "OLM_SECURE_ADMIN_ADDRESS")]
    pub secure_admin_address: Option<SocketAddr>,
    /// Catalogs in this namespace are visible to every namespace.
    #[arg(long, default_value = "olm", env = "OLM_GLOBAL_CATALOG_NAMESPACE")]
    pub global_catalog_namespace: String,
    /// Only watch these namespaces, comma-separated as upstream's `--watchedNamespaces`
    /// (default: all namespaces). Include the global catalog namespace for its catalogs.
    #[arg(long, env = "OLM_WATCH_NAMESPACE", value_delimiter = ',')]
    pub watch_namespace: Vec<String>,
    /// How often each CatalogSource's server or ConfigMap is checked.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub catalog_check_interval: Duration,
    /// Deadline of one registry health check.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub registry_timeout: Duration,
    /// Deadline of one whole catalog load from a registry server (a slower load fails and
    /// the last good content stays in use).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub catalog_load_timeout: Duration,
    /// How long a failing InstallPlan step is retried before the plan is Failed.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub install_plan_retry_timeout: Duration,
    /// A CSV whose Deployments stay unready this long while Installing fails with
    /// InstallCheckFailed.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub install_check_timeout: Duration,
    /// How long the serving certificates OLM issues for operators' webhooks and API
    /// services are valid (upstream: 2 years); they are rotated a day before they expire,
    /// or halfway when valid for less than two days (for trying rotation out).
    #[arg(long, default_value = "730d", value_parser = parse_validity)]
    pub cert_validity: Duration,
    /// How long an InstallPlan keeps trying to pull a bundle image (a catalog entry with no
    /// inline objects) before it fails; the OperatorGroup annotation
    /// `operatorframework.io/bundle-unpack-timeout` overrides it in its namespace.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub bundle_unpack_timeout: Duration,
    /// Make no copied CSVs for AllNamespaces operators (and delete existing ones): with many
    /// namespaces they cost more than they give (upstream #2701). The switch is the
    /// OLMConfig `cluster`'s `spec.features.disableCopiedCSVs`, read live; this flag only
    /// seeds the OLMConfig OLM creates when there is none, and never changes an existing one.
    #[arg(long, env = "OLM_DISABLE_COPIED_CSVS")]
    pub disable_copied_csvs: bool,
    /// Where image catalogs are pulled to (one directory per image digest; kept across
    /// restarts, so an unchanged image is not pulled again).
    #[arg(long, env = "OLM_IMAGE_CACHE_DIR", default_value_os_t = std::env::temp_dir().join("olm-rs-images"))]
    pub image_cache_dir: std::path::PathBuf,
    /// A registry (`host:port`) reached over plain HTTP; loopback addresses always are.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
    pub insecure_registries: Vec<String>,
    /// Registry mirrors for the catalog and bundle images `olm run` pulls itself, in
    /// containers-registries.conf(5) v2 form (the file the nodes' tools read). A missing
    /// file means no mirrors.
    #[arg(long, default_value = "/etc/containers/registries.conf")]
    pub registries_conf: std::path::PathBuf,
    /// Elect a leader on a coordination.k8s.io Lease, so that replicas never act at once.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "OLM_LEADER_ELECT")]
    pub leader_elect: bool,
    #[arg(long, default_value = "olm-leader")]
    pub lease_name: String,
    /// Namespace of the Lease (default: $POD_NAMESPACE, else the global catalog namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// A standby takes over when the leader has not renewed for this long.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub lease_renew_interval: Duration,
    /// How often a standby checks the Lease.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub lease_retry_interval: Duration,
    /// This replica's name in the Lease (default: $POD_NAME, else <hostname>-<pid>).
    #[arg(long)]
    pub identity: Option<String>,
    /// Serve the packages.operators.coreos.com API (`kubectl get packagemanifests`) on this
    /// HOST:PORT (HTTPS), as upstream always does; `off` disables it. The default is a free
    /// loopback port. On a loopback address `olm run` registers itself (an ExternalName
    /// Service to localhost in `default` and the APIService) and removes the registration on
    /// shutdown; elsewhere the Service and APIService come from deploy/.
    #[arg(
        long,
        env = "OLM_PACKAGES_ADDRESS",
        default_value = "127.0.0.1:0",
        value_parser = parse_packages_address
    )]
    pub packages_address: PackagesAddress,
    /// The Service the APIService points at (default: olm-packages in $POD_NAMESPACE, else
    /// in the global catalog namespace; on a loopback address, in `default`).
    #[arg(long, default_value = "olm-packages")]
    pub packages_service: String,
    /// The Secret (next to the Service) holding the serving certificate, in a cluster.
    #[arg(long, default_value = "olm-packages-serving-cert")]
    pub packages_cert_secret: String,
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    if args.lease_renew_interval >= args.lease_duration * 2 / 3 {
        anyhow::bail!(
            "--lease-renew-interval ({:?}) must be shorter than two thirds of --lease-duration ({:?})",
            args.lease_renew_interval,
            args.lease_duration
        );
    }
    let identity = args.identity.unwrap_or_else(default_identity);
    let leader_election = args.leader_elect.then(|| LeaseConfig {
        namespace: args
            .lease_namespace
            .clone()
            .unwrap_or_else(|| args.global_catalog_namespace.clone()),
        name: args.lease_name.clone(),
        identity: identity.clone(),
        lease_duration: args.lease_duration,
        renew_interval: args.lease_renew_interval,
        retry_interval: args.lease_retry_interval,
    });
    let packages = args.packages_address.0.map(|address| {
        let namespace = if address.ip().is_loopback() {
            "default".to_string()
        } else {
            args.lease_namespace
                .clone()
                .unwrap_or_else(|| args.global_catalog_namespace.clone())
        };
        crate::packageserver::PackagesConfig {
            address,
            service: crate::packageserver::register::ServiceRef {
                name: args.packages_service.clone(),
                namespace,
            },
            cert_secret: args.packages_cert_secret.clone(),
            global_namespace: args.global_catalog_namespace.clone(),
        }
    });
    let config = RunConfig {
        packages,
        admin_address: args.admin_address,
        secure_admin_address: args.secure_admin_address,
        leader_election,
        identity,
        watch_namespaces: watch_namespaces(args.watch_namespace),
        settings: Settings {
            global_catalog_namespace: args.global_catalog_namespace,
            watch_namespace: None,
            catalog_check_interval: args.catalog_check_interval,
            registry_timeout: args.registry_timeout,
            catalog_load_timeout: args.catalog_load_timeout,
            install_plan_retry_timeout: args.install_plan_retry_timeout,
            install_check_timeout: args.install_check_timeout,
            cert_validity: args.cert_validity,
            bundle_unpack_timeout: args.bundle_unpack_timeout,
            disable_copied_csvs: args.disable_copied_csvs,
            image_cache_dir: args.image_cache_dir,
            insecure_registries: args.insecure_registries,
            mirrors: std::sync::Arc::new(crate::oci::mirrors::LiveMirrors::new(
                crate::oci::mirrors::Mirrors::load(&args.registries_conf)?,
            )),
        },
    };
    // Memory: jemalloc, tuned for a server (crate::allocator).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(crate::runtime::run(config))
}

/// Empty entries (`a,,b`, a trailing comma, an empty variable) mean nothing; duplicates once.
fn watch_namespaces(given: Vec<String>) -> Vec<String> {
    let mut namespaces: Vec<String> = given
        .into_iter()
        .map(|ns| ns.trim().to_string())
        .filter(|ns| !ns.is_empty())
        .collect();
    namespaces.sort();
    namespaces.dedup();
    namespaces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watched_namespaces_ignore_empty_entries_and_duplicates() {
        let given = ["b", "", " a ", "b"].map(String::from).to_vec();
        assert_eq!(watch_namespaces(given), ["a", "b"]);
        assert!(watch_namespaces(vec![String::new()]).is_empty());
    }
}
