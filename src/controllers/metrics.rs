//! Prometheus metrics of `olm run`, served on `/metrics` by the admin server.
//!
//! Every series carries the `olm_` prefix. Reconciles are counted per controller, failures
//! per controller and error kind, and their duration goes into a histogram.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub controller: &'static str,
    pub error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CatalogLabels {
    pub namespace: String,
    pub name: String,
}

pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<ControllerLabels, Counter>,
    pub failures: Family<FailureLabels, Counter>,
    pub reconcile_seconds: Family<ControllerLabels, Histogram>,
    /// 1 while this process holds the leader Lease.
    pub leader: Gauge,
    /// Status writes, to show that a steady state writes nothing.
    pub status_writes: Family<ControllerLabels, Counter>,
    /// Catalog content reads (each gRPC load or ConfigMap parse).
    pub catalog_loads: Family<CatalogLabels, Counter>,
    /// Content loads that found a different catalog than the snapshot in use.
    pub catalog_updates: Family<CatalogLabels, Counter>,
    pub catalog_bundles: Family<CatalogLabels, Gauge>,
    /// Reconciles that panicked (caught; the object gets an error condition).
    pub panics: Family<ControllerLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("olm");
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let failures = Family::<FailureLabels, Counter>::default();
        let reconcile_seconds = Family::<ControllerLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 4.0, 9))
        });
        let leader = Gauge::default();
        let status_writes = Family::<ControllerLabels, Counter>::default();
        let catalog_loads = Family::<CatalogLabels, Counter>::default();
        let catalog_updates = Family::<CatalogLabels, Counter>::default();
        let catalog_bundles = Family::<CatalogLabels, Gauge>::default();
        let panics = Family::<ControllerLabels, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles run, per controller",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_failures",
            "Reconciles that ended in an error, per controller and error kind",
            failures.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "How long reconciles take",
            reconcile_seconds.clone(),
        );
        registry.register(
            "leader",
            "1 while this process holds the leader Lease",
            leader.clone(),
        );
        registry.register(
            "status_writes",
            "Status patches sent to the API server, per controller",
            status_writes.clone(),
        );
        registry.register(
            "catalog_loads",
            "Catalog content reads (gRPC loads and ConfigMap parses)",
            catalog_loads.clone(),
        );
        registry.register(
            "catalog_content_updates",
            "Catalog loads whose content differed from the snapshot in use",
            catalog_updates.clone(),
        );
        registry.register(
            "catalog_bundles",
            "Bundles in the catalog snapshot in use",
            catalog_bundles.clone(),
        );
        registry.register(
            "reconcile_panics",
            "Reconciles that panicked; the panic was caught and reported on the object",
            panics.clone(),
        );
        Metrics {
            registry,
            panics,
            reconciles,
            failures,
            reconcile_seconds,
            leader,
            status_writes,
            catalog_loads,
            catalog_updates,
            catalog_bundles,
        }
    }
}

impl Metrics {
    /// Counts a reconcile and times it until the returned guard drops.
    pub fn reconcile_started(&self, controller: &'static str) -> ReconcileTimer {
        self.reconciles
            .get_or_create(&ControllerLabels { controller })
            .inc();
        ReconcileTimer {
            histogram: self
                .reconcile_seconds
                .get_or_create(&ControllerLabels { controller })
                .clone(),
            start: Instant::now(),
        }
    }

    pub fn reconcile_failed(&self, controller: &'static str, error: &'static str) {
        self.failures
            .get_or_create(&FailureLabels { controller, error })
            .inc();
    }

    pub fn reconcile_panicked(&self, controller: &'static str) {
        self.panics
            .get_or_create(&ControllerLabels { controller })
            .inc();
    }

    pub fn status_written(&self, controller: &'static str) {
        self.status_writes
            .get_or_create(&ControllerLabels { controller })
            .inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

pub struct ReconcileTimer {
    histogram: Histogram,
    start: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_show_up_in_the_exposition() {
        let metrics = Metrics::default();
        drop(metrics.reconcile_started("catalogsource"));
        metrics.reconcile_failed("catalogsource", "kube");
        metrics.leader.set(1);
        let text = metrics.encode();
        assert!(
            text.contains(r#"olm_reconciles_total{controller="catalogsource"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"olm_reconcile_failures_total{controller="catalogsource",error="kube"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains("olm_leader 1"), "{text}");
        assert!(
            text.contains("olm_reconcile_duration_seconds_count"),
            "{text}"
        );
    }
}
