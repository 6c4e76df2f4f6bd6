//! Two `olm run` replicas against one control plane: one leads (holds the Lease, runs the
//! controllers), the other stands by; killed without warning, the leader is replaced within
//! 15 s; stopped politely, it hands the Lease over at once; cut off from the API server (its
//! calls hang), it stops acting and exits before the standby takes over.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::catalog_sources::{catalog_source_yaml, wait_for_state};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, repo_root};
use super::processes::{OlmRun, free_port, http_get, olm_serve};
use super::proxy::{Proxy, api_server};

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
    // The standby holds the catalog too (read-only servers answer from it on every
    // replica) but writes nothing: the leader's status writes are the only ones.
    let standby = &replicas[standby_index].1;
    eventually(
        "the standby's read-only snapshot",
        Duration::from_secs(30),
        || async { standby.snapshot(&ns.name, "first") },
    )
    .await;
    assert_eq!(
        standby
            .metric(r#"olm_status_writes_total{controller="catalogsource"}"#)
            .unwrap_or(0.0),
        0.0,
        "the standby must not write"
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

const LEASE_DURATION: Duration = Duration::from_secs(10);
const RENEW_DEADLINE: Duration = Duration::from_millis(6_667);

/// `olm run` flags for one replica, logging JSON lines (their timestamps are compared).
fn replica_flags<'a>(namespace: &'a str, identity: &'a str) -> [&'a str; 12] {
    [
        "--identity",
        identity,
        "--lease-namespace",
        namespace,
        "--lease-name",
        "olm-leader",
        "--lease-duration",
        "10s",
        "--lease-renew-interval",
        "2s",
        "--log-format",
        "json",
    ]
}

/// `/readyz` of several replicas, sampled from a thread as fast as they answer: who said
/// "ok (leader)" when, from outside the processes.
struct Roles {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Sample>>>,
}

/// A "leader" answer was true at some moment between `asked` and `answered`.
struct Sample {
    asked: Instant,
    answered: Instant,
    replica: usize,
    leader: bool,
}

impl Roles {
    fn watch(admin_ports: Vec<u16>) -> Roles {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = Arc::clone(&stop);
            move || {
                let mut samples = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    for (replica, port) in admin_ports.iter().enumerate() {
                        let asked = Instant::now();
                        let leader = http_get(*port, "/readyz").is_some_and(|a| is_leader(&a));
                        samples.push(Sample {
                            asked,
                            answered: Instant::now(),
                            replica,
                            leader,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                samples
            }
        });
        Roles {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Roles {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn is_leader(answer: &(u16, String)) -> bool {
    answer.0 == 200 && answer.1 == "ok (leader)"
}

/// The JSON lines of a process log (`--log-format json`); other lines are skipped.
fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect()
}

fn timestamp(line: &Value) -> Timestamp {
    line["timestamp"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("a log line without a timestamp: {line}"))
}

/// When a log first has a line whose message contains `text`.
fn first(lines: &[Value], text: &str) -> Option<Timestamp> {
    lines
        .iter()
        .find(|line| line["message"].as_str().is_some_and(|m| m.contains(text)))
        .map(timestamp)
}

fn seconds(from: Timestamp, to: Timestamp) -> f64 {
    (to.as_microsecond() - from.as_microsecond()) as f64 / 1e6
}

/// The leader's connection to the API server goes silent (a proxy stops forwarding bytes
/// but keeps the sockets open, so its calls hang instead of failing). It must stop acting
/// within the renew deadline, before the standby may take over, and exit non-zero.
#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_stops_before_the_standby_starts() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "leader-cut").await;
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    let proxy = Proxy::start(api_server());

    let mut old = OlmRun::start_with(
        &proxy.kubeconfig(),
        &ns.name,
        &replica_flags(&ns.name, "replica-old"),
    );
    eventually("replica-old to lead", Duration::from_secs(30), || async {
        (holder(&ns.name).as_deref() == Some("replica-old")).then_some(())
    })
    .await;
    let new = OlmRun::start(&ns.name, &replica_flags(&ns.name, "replica-new"));
    eventually("both roles", Duration::from_secs(30), || async {
        let old = old.get("/readyz")?;
        let new = new.get("/readyz")?;
        (old.1 == "ok (leader)" && new.1 == "ok (standby)").then_some(())
    })
    .await;
    // The old leader acts, through the proxy.
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
    assert!(old.snapshot(&ns.name, "first").is_some());
    assert_eq!(
        new.metric(r#"olm_status_writes_total{controller="catalogsource"}"#)
            .unwrap_or(0.0),
        0.0,
        "the standby writes nothing"
    );

    let roles = Roles::watch(vec![old.admin_port, new.admin_port]);
    let cut_wall = Timestamp::now();
    let cut = Instant::now();
    proxy.black_hole();

    // The old leader steps down on its own and exits non-zero, to come back clean.
    let exit = loop {
        if let Some(status) = old.process.exited() {
            break status;
        }
        assert!(
            cut.elapsed() < RENEW_DEADLINE + Duration::from_secs(15),
            "the cut-off leader is still running {:?} after the cut (its /readyz: {:?}; the \
             standby's: {:?}; Lease holder: {:?}); log: {}",
            cut.elapsed(),
            old.get("/readyz"),
            new.get("/readyz"),
            holder(&ns.name),
            old.process.log.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let exited_after = cut.elapsed();
    assert!(
        !exit.success(),
        "a leader that lost the Lease exits non-zero: {exit}"
    );

    eventually(
        "replica-new to take the lease",
        Duration::from_secs(30),
        || async { (holder(&ns.name).as_deref() == Some("replica-new")).then_some(()) },
    )
    .await;
    eventually(
        "replica-new to report leading",
        Duration::from_secs(5),
        || async { new.get("/readyz").filter(is_leader) },
    )
    .await;
    let samples = roles.stop();

    // Seen from outside: the old leader's last "leader" answer came before the new one's
    // first was asked for (counting each at its least favourable moment).
    let last_old = samples
        .iter()
        .filter(|s| s.replica == 0 && s.leader)
        .map(|s| s.answered)
        .max()
        .expect("the old leader answered as leader before the cut");
    let first_new = samples
        .iter()
        .filter(|s| s.replica == 1 && s.leader)
        .map(|s| s.asked)
        .min()
        .expect("the new leader answered as leader");
    assert!(
        last_old < first_new,
        "both answered 'ok (leader)' at once: the old one until {:?} after the cut, the new one from {:?}",
        last_old - cut,
        first_new.saturating_duration_since(cut)
    );

    // Seen from the processes' own logs: the old leader stepped down (and no controller of
    // it logged anything after that) before the new one acquired the Lease.
    let old_log = json_lines(&old.process.log_text());
    let new_log = json_lines(&new.process.log_text());
    let stepped_down = first(&old_log, "stepped down").unwrap_or_else(|| {
        panic!(
            "the old leader never logged stepping down: {}",
            old.process.log.display()
        )
    });
    let acquired = first(&new_log, "acquired the leader lease").unwrap_or_else(|| {
        panic!(
            "the new leader never logged acquiring: {}",
            new.process.log.display()
        )
    });
    assert!(
        stepped_down < acquired,
        "the old leader stepped down at {stepped_down}, after the new one acquired at {acquired}"
    );
    assert!(
        seconds(cut_wall, stepped_down) <= (RENEW_DEADLINE + Duration::from_secs(1)).as_secs_f64(),
        "the old leader stepped down {}s after the cut, later than the renew deadline",
        seconds(cut_wall, stepped_down)
    );
    let exit_delay = exited_after.as_secs_f64() - seconds(cut_wall, stepped_down);
    assert!(
        exit_delay < 5.0,
        "the old leader exited {exit_delay:.2}s after stepping down"
    );
    let acting_after: Vec<&Value> = old_log
        .iter()
        .filter(|line| {
            line["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("olm::controllers"))
                && timestamp(line) > stepped_down
        })
        .collect();
    assert!(
        acting_after.is_empty(),
        "the old leader's controllers acted after it stepped down: {acting_after:#?}"
    );
    eprintln!(
        "cut-off leader stepped down {:.2}s after the cut and exited after {:.2}s; \
         the standby took over {:.2}s after the cut ({:.2}s with nobody leading); \
         lease duration {LEASE_DURATION:?}, renew deadline {RENEW_DEADLINE:?}",
        seconds(cut_wall, stepped_down),
        exited_after.as_secs_f64(),
        seconds(cut_wall, acquired),
        seconds(stepped_down, acquired),
    );

    // And the new leader acts: it serves the existing catalog and a new one.
    eventually(
        "the new leader's snapshot",
        Duration::from_secs(30),
        || async { new.snapshot(&ns.name, "first") },
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
}
