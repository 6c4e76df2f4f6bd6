//! Two `olm run` replicas against one control plane: one leads (holds the Lease, runs the
//! controllers), the other stands by; killed without warning, the leader is replaced within
//! 15 s; stopped politely, it hands the Lease over at once.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::catalog_sources::{catalog_source_yaml, wait_for_state};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, repo_root};
use super::processes::{OlmRun, free_port, olm_serve};

fn holder(namespace: &str) -> Option<String> {
    let out = kubectl(
        &["get", "lease", "olm-leader", "-n", namespace, "-o", "json"],
        None,
    );
    if !out.success() {
        return None;
    }
    let lease: Value = serde_json::from_str(&out.stdout()).ok()?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_string)
}

fn replica(namespace: &str, identity: &str) -> OlmRun {
    OlmRun::start(
        namespace,
        &[
            "--identity",
            identity,
            "--lease-namespace",
            namespace,
            "--lease-name",
            "olm-leader",
        ],
    )
}

#[tokio::test]
async fn a_standby_takes_over_within_15s_when_the_leader_dies() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "leader").await;
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    let mut replicas = vec![
        ("a", replica(&ns.name, "replica-a")),
        ("b", replica(&ns.name, "replica-b")),
    ];

    let leader = eventually("a leader", Duration::from_secs(30), || async {
        holder(&ns.name)
    })
    .await;
    let (leader_index, standby_index) = if leader == "replica-a" {
        (0, 1)
    } else {
        (1, 0)
    };
    assert!(leader == "replica-a" || leader == "replica-b", "{leader}");
    // Exactly one acts: the leader reports leading, the standby does not.
    eventually("the leader's metrics", Duration::from_secs(10), || async {
        (replicas[leader_index].1.metric("olm_leader") == Some(1.0)).then_some(())
    })
    .await;
    assert_eq!(replicas[standby_index].1.metric("olm_leader"), Some(0.0));
    let (code, body) = replicas[standby_index].1.get("/readyz").unwrap();
    assert_eq!((code, body.as_str()), (200, "ok (standby)"));

    kubectl(
        &["apply", "-f", "-"],
        Some(&catalog_source_yaml(
            &ns.name,
            "first",
            &format!("127.0.0.1:{port}"),
            "",
        )),
    )
    .ok();
    wait_for_state(&ns.name, "first", "READY");
    assert!(
        replicas[leader_index]
            .1
            .snapshot(&ns.name, "first")
            .is_some()
    );
    assert!(
        replicas[standby_index]
            .1
            .snapshot(&ns.name, "first")
            .is_none(),
        "the standby must not act"
    );

    // The leader dies without releasing anything.
    let killed = Instant::now();
    replicas[leader_index].1.process.kill();
    let standby_name = format!("replica-{}", replicas[standby_index].0);
    eventually(
        "the standby to take the lease",
        Duration::from_secs(15),
        || async { (holder(&ns.name).as_deref() == Some(standby_name.as_str())).then_some(()) },
    )
    .await;
    let took_over = killed.elapsed();
    assert!(
        took_over < Duration::from_secs(15),
        "took over after {took_over:?}"
    );
    let new_leader = &replicas[standby_index].1;
    eventually(
        "the new leader's metrics",
        Duration::from_secs(5),
        || async { (new_leader.metric("olm_leader") == Some(1.0)).then_some(()) },
    )
    .await;

    // And it acts: it loads the existing catalog and serves a new one.
    eventually(
        "the new leader's snapshot",
        Duration::from_secs(30),
        || async { new_leader.snapshot(&ns.name, "first") },
    )
    .await;
    kubectl(
        &["apply", "-f", "-"],
        Some(&catalog_source_yaml(
            &ns.name,
            "second",
            &format!("127.0.0.1:{port}"),
            "",
        )),
    )
    .ok();
    wait_for_state(&ns.name, "second", "READY");
    eprintln!("standby took over {took_over:?} after the leader was killed");

    // A polite stop (SIGTERM) releases the Lease instead of letting it expire.
    let status = replicas[standby_index]
        .1
        .process
        .terminate(Duration::from_secs(20));
    assert!(status.success(), "olm run exits 0 on SIGTERM: {status}");
    assert_eq!(holder(&ns.name), None, "the lease is released on shutdown");
    replicas.clear();
}
