//! Manual approval: a plan waits for `spec.approved` without holding back Automatic
//! Subscriptions, and an upgrade approved hop by hop never loses the installed CSV.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use olm::api::{Approval, ClusterServiceVersion, CsvPhase, InstallPlanPhase, SubscriptionState};

use super::{Setup, WAIT, our_catalog};
use crate::harness::{CsvReads, SubscriptionReads, eventually};

#[tokio::test]
async fn manual_approval_waits_and_never_holds_back_an_automatic_subscription() {
    let s = Setup::new("sub-manual", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: stable\n  installPlanApproval: Manual\n",
    );
    s.subscribe("at", "at", "");

    // The Automatic one installs meanwhile.
    s.installed("at", "at.v0.2.0").await;
    let pending = s
        .sub_status(
            "reverse-words",
            "InstallPlanPending/RequiresApproval",
            |sub| {
                sub.condition("InstallPlanPending")
                    .is_some_and(|c| c.reason.as_deref() == Some("RequiresApproval"))
            },
        )
        .await;
    assert_eq!(pending.state(), SubscriptionState::UpgradePending);
    assert_eq!(pending.current_csv(), "reverse-words.v0.4.0");
    let plan = pending.plan_name().unwrap().to_string();
    let waiting = s
        .plan_phase(&plan, InstallPlanPhase::RequiresApproval)
        .await;
    assert_eq!(waiting.spec.approval, Approval::Manual);
    assert!(!waiting.spec.approved);
    assert_eq!(
        waiting.spec.cluster_service_version_names,
        ["reverse-words.v0.4.0"]
    );
    assert!(
        s.ns.get_opt::<ClusterServiceVersion>("reverse-words.v0.4.0")
            .await
            .is_none(),
        "nothing installed before approval"
    );

    s.approve(&plan);
    s.plan_phase(&plan, InstallPlanPhase::Complete).await;
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    assert_eq!(s.plans().await.len(), 2);
}

/// What [`hop_by_hop_installed_csv_is_never_lost_and_replaced_csvs_go`] has seen so far.
#[derive(Default)]
struct Hops {
    approved: BTreeSet<String>,
    violations: Vec<String>,
    /// Since when each CSV has been Replacing while its replacement Succeeded.
    replacing_since: BTreeMap<String, Instant>,
    /// Since when `installedCSV` has been empty while a CSV Succeeded.
    empty_since: Option<Instant>,
}

/// The two races of issue 30, watched over Manual hops approved one at a time: while a CSV
/// of the package is Succeeded the Subscription's `installedCSV` is never empty, and no CSV
/// stays Replacing more than a few seconds after its replacement Succeeded.
#[tokio::test]
async fn hop_by_hop_installed_csv_is_never_lost_and_replaced_csvs_go() {
    let s = Setup::new("sub-manual-hops", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: alpha\n  startingCSV: reverse-words.v0.1.0\n  installPlanApproval: Manual\n",
    );
    let hops = RefCell::new(Hops::default());
    eventually("the hops approved one at a time", WAIT * 2, || async {
        let sub = s.subscription("reverse-words").await;
        let csvs = s.csvs().await;
        let installed = sub.installed_csv();
        let succeeded: Vec<String> = csvs
            .iter()
            .filter(|c| c.phase() == CsvPhase::Succeeded)
            .map(ResourceExt::name_any)
            .collect();
        {
            let mut seen = hops.borrow_mut();
            // The Subscription catches up with a CSV's phase within a round or two; empty
            // for longer while a CSV of it is Succeeded is the race.
            if !succeeded.is_empty() && installed.is_empty() {
                let since = *seen.empty_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(5) {
                    seen.violations.push(format!(
                        "installedCSV empty 5 s while {succeeded:?} Succeeded"
                    ));
                    seen.empty_since = None;
                }
            } else {
                seen.empty_since = None;
            }
            for old in csvs.iter().filter(|c| c.phase() == CsvPhase::Replacing) {
                let name = old.name_any();
                let replaced_by_succeeded = csvs.iter().any(|c| {
                    c.spec.replaces.as_deref() == Some(name.as_str())
                        && c.phase() == CsvPhase::Succeeded
                });
                if replaced_by_succeeded {
                    let since = *seen
                        .replacing_since
                        .entry(name.clone())
                        .or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_secs(10) {
                        seen.violations.push(format!(
                            "{name} still Replacing 10 s after its replacement Succeeded"
                        ));
                        seen.replacing_since.remove(&name);
                    }
                }
            }
        }
        if installed == "reverse-words.v0.4.0" && sub.state() == SubscriptionState::AtLatestKnown {
            return Some(());
        }
        for plan in s.plans().await {
            let name = plan.name_any();
            if plan.phase() == InstallPlanPhase::RequiresApproval
                && hops.borrow_mut().approved.insert(name.clone())
            {
                // While the next hop waits for approval, installedCSV names the CSV that is
                // Succeeded (what `kubectl operator uninstall` deletes), not the old one.
                if !succeeded.is_empty() {
                    eventually("installedCSV is the Succeeded CSV", WAIT, || async {
                        let sub = s.subscription("reverse-words").await;
                        let csvs = s.csvs().await;
                        csvs.iter()
                            .any(|c| {
                                c.phase() == CsvPhase::Succeeded
                                    && c.name_any() == sub.installed_csv()
                            })
                            .then_some(())
                    })
                    .await;
                }
                s.approve(&name);
            }
        }
        None
    })
    .await;
    let hops = hops.into_inner();
    assert!(hops.violations.is_empty(), "{:#?}", hops.violations);
    assert_eq!(
        hops.approved.len(),
        3,
        "one approval per hop: {:?}",
        hops.approved
    );
}
