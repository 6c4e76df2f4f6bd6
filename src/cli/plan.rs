//! `olm plan`: InstallPlans as a person reads them. `olm plan show NAMESPACE/PLAN` prints
//! the preview OLM wrote before the plan runs (`status.impact`).

use std::fmt::Write as _;

use anyhow::{Context, bail};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Api;

use crate::api::{InstallPlan, ObjectRef, PlanImpact, RuleChange};
use crate::controllers::authz::describe;

#[derive(clap::Subcommand, Debug)]
pub enum PlanCommand {
    /// Print what running an InstallPlan changes: RBAC, CRDs, images, webhooks and
    /// APIServices, objects, and what blocks it.
    Show(ShowArgs),
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// The InstallPlan, as `NAMESPACE/NAME`.
    #[arg(value_name = "NAMESPACE/PLAN")]
    plan: String,
}

pub fn run(command: PlanCommand) -> anyhow::Result<()> {
    match command {
        PlanCommand::Show(args) => show(&args.plan),
    }
}

fn show(plan: &str) -> anyhow::Result<()> {
    let Some((namespace, name)) = plan.split_once('/') else {
        bail!("{plan}: expected NAMESPACE/PLAN");
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let found = runtime.block_on(async {
        let client = kube::Client::try_default()
            .await
            .context("connecting to the API server (KUBECONFIG or in-cluster config)")?;
        let plans: Api<InstallPlan> = Api::namespaced(client, namespace);
        plans
            .get_opt(name)
            .await
            .with_context(|| format!("reading InstallPlan {plan}"))
    })?;
    let Some(found) = found else {
        bail!("InstallPlan {plan} not found");
    };
    let status = found.status.unwrap_or_default();
    let Some(impact) = status.impact else {
        bail!("InstallPlan {plan} has no preview yet");
    };
    let csvs = found.spec.cluster_service_version_names.join(", ");
    println!("InstallPlan {plan} ({:?}; {csvs})", status.phase);
    print!("{}", render(&impact));
    Ok(())
}

/// The preview for a person: the summary, then one section per kind of change.
pub fn render(impact: &PlanImpact) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Summary: {}", impact.summary);
    if let Some(at) = &impact.computed_at {
        let _ = writeln!(out, "Computed: {}", at.0);
    }
    let mut lines = Vec::new();
    for account in &impact.rbac {
        lines.push(account.service_account.clone());
        let changes = account
            .added
            .iter()
            .map(|r| ('+', r))
            .chain(account.removed.iter().map(|r| ('-', r)));
        lines.extend(changes.map(|(sign, r)| format!("  {sign} {}", rule_line(r))));
    }
    section(&mut out, "RBAC", &lines);
    section(&mut out, "CRDs", &crd_lines(impact));
    let images: Vec<String> = impact
        .images
        .iter()
        .map(|i| {
            let image = |i: &Option<String>| i.clone().unwrap_or_else(|| "(none)".into());
            let (from, to) = (image(&i.from), image(&i.to));
            format!("{}/{}: {from} -> {to}", i.deployment, i.container)
        })
        .collect();
    section(&mut out, "Images", &images);
    let named: Vec<String> = impact
        .webhooks
        .iter()
        .chain(&impact.api_services)
        .map(|c| format!("{} {} {}", c.change, c.kind, c.name))
        .collect();
    section(&mut out, "Webhooks and APIServices", &named);
    let o = &impact.objects;
    let objects: Vec<String> = [('+', &o.created), ('~', &o.updated), ('-', &o.deleted)]
        .into_iter()
        .flat_map(|(sign, refs)| {
            refs.iter()
                .map(move |r| format!("{sign} {}", object_line(r)))
        })
        .collect();
    section(&mut out, "Objects", &objects);
    section(&mut out, "Blockers", &impact.blockers);
    out
}

fn section(out: &mut String, title: &str, lines: &[String]) {
    let _ = writeln!(out, "\n{title}");
    if lines.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
}

/// `Scope {rule}`, the rule as upstream prints it, and `ESCALATION` when it is one (or
/// `renewed` for the OperatorCondition grant that follows the CSV's name).
fn rule_line(change: &RuleChange) -> String {
    let rule = serde_json::from_value::<PolicyRule>(change.rule.clone())
        .map_or_else(|_| change.rule.to_string(), |r| describe(&r));
    let escalation = match (change.escalation, change.renewed) {
        (_, true) => "  (renewed: the replaced CSV's OperatorCondition grant)",
        (true, false) => "  ESCALATION",
        (false, false) => "",
    };
    format!("{} {rule}{escalation}", change.scope)
}

fn crd_lines(impact: &PlanImpact) -> Vec<String> {
    let mut lines = Vec::new();
    for crd in &impact.crds {
        let schema = if crd.schema_changed {
            ", schema changed"
        } else {
            ""
        };
        lines.push(format!("{}: {}{schema}", crd.name, crd.change));
        let lists = [
            ("versions added", &crd.versions_added),
            ("versions no longer served", &crd.versions_unserved),
            ("versions removed", &crd.versions_removed),
            ("stored versions unserved", &crd.stored_versions_unserved),
        ];
        for (what, versions) in lists.into_iter().filter(|(_, v)| !v.is_empty()) {
            lines.push(format!("  {what}: {}", versions.join(", ")));
        }
        lines.extend(crd.objects_failing.iter().map(|o| format!("  refuses {o}")));
        lines.extend(
            crd.objects_pruned
                .iter()
                .map(|o| format!("  would drop {o}")),
        );
    }
    lines
}

fn object_line(r: &ObjectRef) -> String {
    match &r.namespace {
        Some(ns) => format!("{} {} {ns}/{}", r.api_version, r.kind, r.name),
        None => format!("{} {} {}", r.api_version, r.kind, r.name),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::{AccountImpact, CrdImpact, ImageChange, ObjectChanges};

    #[test]
    fn a_preview_reads_section_by_section() {
        let impact = PlanImpact {
            summary: "1 escalation; +1 -1 rules".into(),
            rbac: vec![AccountImpact {
                service_account: "ns/op".into(),
                added: vec![RuleChange {
                    scope: "Namespace".into(),
                    rule: json!({"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}),
                    escalation: true,
                    renewed: false,
                }],
                removed: vec![RuleChange {
                    scope: "Cluster".into(),
                    rule: json!({"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}),
                    escalation: false,
                    renewed: false,
                }],
            }],
            crds: vec![CrdImpact {
                name: "apps.example.com".into(),
                change: "Updated".into(),
                versions_added: vec!["v2".into()],
                schema_changed: true,
                ..CrdImpact::default()
            }],
            images: vec![ImageChange {
                deployment: "op".into(),
                container: "manager".into(),
                from: Some("op:v1".into()),
                to: None,
            }],
            objects: ObjectChanges {
                deleted: vec![ObjectRef {
                    api_version: "operators.coreos.com/v1alpha1".into(),
                    kind: "ClusterServiceVersion".into(),
                    namespace: Some("ns".into()),
                    name: "op.v1".into(),
                }],
                ..ObjectChanges::default()
            },
            ..PlanImpact::default()
        };
        assert_eq!(
            render(&impact),
            r#"Summary: 1 escalation; +1 -1 rules

RBAC
  ns/op
    + Namespace {"verbs":["create"],"apiGroups":["events.k8s.io"],"resources":["events"]}  ESCALATION
    - Cluster {"verbs":["list"],"apiGroups":[""],"resources":["nodes"]}

CRDs
  apps.example.com: Updated, schema changed
    versions added: v2

Images
  op/manager: op:v1 -> (none)

Webhooks and APIServices
  (none)

Objects
  - operators.coreos.com/v1alpha1 ClusterServiceVersion ns/op.v1

Blockers
  (none)
"#
        );
    }
}
