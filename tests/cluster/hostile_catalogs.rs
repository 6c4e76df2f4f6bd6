//! Hostile catalogs against a running `olm run` (issue 14 §3): a registry server that
//! answers slowly, never answers, cuts `ListBundles` half-way, sends a 100 MB bundle or a
//! million bundles; a ConfigMap catalog at the API server's size limit full of garbage; and
//! 100 CatalogSources of which half are broken. In each, `olm run` stays ready (`/readyz`
//! never fails [`PROBE_FAILURES`] times in a row, each ask bounded by 1 s, as a kubelet
//! readiness probe with its defaults would judge it), a healthy CatalogSource's new content still lands, the
//! hostile one says what happened in a condition and keeps its last good snapshot, and the
//! process's peak RSS stays under [`RSS_BOUND_MIB`].
//!
//! `hack/bench/hostile.py` runs these with `OLM_HOSTILE_FIGURES` set to collect the figures
//! (peak RSS per case, update latency among broken sources) that it prints.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::catalog_sources::{catalog_source_yaml, condition, get_json};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, repo_root};
use super::hostile_registry::{Behaviour, HostileRegistry, catalog_index};
use super::processes::{OlmRun, free_port};

const WAIT: Duration = Duration::from_secs(90);
/// The peak RSS `olm run` must stay under in every hostile case (debug build; a healthy
/// `olm run` with these catalogs peaks near 40 MiB).
const RSS_BOUND_MIB: f64 = 256.0;
/// With many hostile servers at once: the base plus the budget of catalog loads in flight
/// (`olm::registry::limits::MAX_LOADING_BYTES`, 384 MiB estimated).
const MANY_RSS_BOUND_MIB: f64 = 512.0;
/// A `/readyz` ask fails when it takes longer than this (a probe's default `timeoutSeconds`).
const READYZ_BOUND: Duration = Duration::from_secs(1);
/// Failed asks in a row that would make a kubelet mark the pod unready (the default
/// `failureThreshold`); a single slow ask on a loaded 2-core machine is not unreadiness.
const PROBE_FAILURES: usize = 3;
const POLL_1S: &str = "  updateStrategy:\n    registryPoll:\n      interval: 1s\n";

/// A figure for the bench script (a JSON line in `$OLM_HOSTILE_FIGURES`), also logged.
fn record_figure(case: &str, figure: &str, value: f64) {
    eprintln!("figure: {case} {figure} = {value:.1}");
    if let Some(path) = std::env::var_os("OLM_HOSTILE_FIGURES") {
        let line = json!({"case": case, "figure": figure, "value": value}).to_string();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(file, "{line}").unwrap();
    }
}

/// A `/proc/PID/status` field in MiB (VmHWM: peak RSS; VmRSS: RSS now).
fn proc_status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kib| kib / 1024.0)
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Asks `/readyz` over and over from a thread of its own, each time with a deadline of
/// [`READYZ_BOUND`], until stopped: the slowest answer and every failure are kept.
struct ReadyzWatch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<ProbeRecord>>,
}

impl ReadyzWatch {
    /// Waits for the first 200 (the admin port listens a little before the process is
    /// ready, and longer so on a loaded machine), then starts asking.
    fn start(admin_port: u16) -> ReadyzWatch {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !matches!(readyz(admin_port), Ok(200)) {
            assert!(
                Instant::now() < deadline,
                "/readyz never answered 200 within 60s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut seen = ProbeRecord::default();
            while !stopped.load(Ordering::Acquire) {
                let started = Instant::now();
                let answer = readyz(admin_port);
                seen.record(answer, started.elapsed());
                // Ask about ten times a second.
                std::thread::sleep(Duration::from_millis(100));
            }
            seen
        });
        ReadyzWatch {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops asking; panics if `/readyz` failed [`PROBE_FAILURES`] times in a row.
    /// Returns the slowest answer.
    fn finish(mut self) -> Duration {
        self.stop.store(true, Ordering::Release);
        let seen = self.thread.take().unwrap().join().unwrap();
        assert!(seen.asked > 0, "/readyz was never asked");
        assert!(
            seen.longest_run < PROBE_FAILURES,
            "/readyz failed {} times in a row ({} failures of {} asks), first: {:?}",
            seen.longest_run,
            seen.failures.len(),
            seen.asked,
            &seen.failures[..seen.failures.len().min(3)]
        );
        seen.slowest
    }
}

/// What [`ReadyzWatch`] saw: the slowest answer, every failure, the longest run of them.
#[derive(Default)]
struct ProbeRecord {
    slowest: Duration,
    failures: Vec<String>,
    asked: usize,
    run: usize,
    longest_run: usize,
}

impl ProbeRecord {
    fn record(&mut self, answer: std::io::Result<u16>, took: Duration) {
        self.slowest = self.slowest.max(took);
        self.asked += 1;
        match answer {
            Ok(200) if took < READYZ_BOUND => self.run = 0,
            other => {
                self.failures.push(format!("{other:?} after {took:?}"));
                self.run += 1;
                self.longest_run = self.longest_run.max(self.run);
            }
        }
    }
}

impl Drop for ReadyzWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// The status code of `GET /readyz`, within [`READYZ_BOUND`].
fn readyz(port: u16) -> std::io::Result<u16> {
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&address, READYZ_BOUND)?;
    stream.set_read_timeout(Some(READYZ_BOUND))?;
    stream.set_write_timeout(Some(READYZ_BOUND))?;
    write!(stream, "GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not HTTP: {response:?}")))
}

fn apply(yaml: &str) {
    kubectl(&["apply", "-f", "-"], Some(yaml)).ok();
}

/// Waits until the CatalogSource's `type_` condition is False with `reason` and a message
/// containing `part`; returns the message.
async fn wait_for_failure(
    namespace: &str,
    name: &str,
    type_: &str,
    reason: &str,
    part: &str,
) -> String {
    wait_for_failure_within(namespace, name, type_, reason, part, WAIT).await
}

async fn wait_for_failure_within(
    namespace: &str,
    name: &str,
    type_: &str,
    reason: &str,
    part: &str,
    within: Duration,
) -> String {
    eventually(
        &format!("{name}: {type_}=False/{reason} saying {part:?}"),
        within,
        || async {
            let catsrc = get_json(namespace, &format!("catalogsource/{name}"));
            let found = catsrc["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == type_)?
                .clone();
            (found["status"] == "False" && found["reason"] == reason)
                .then(|| found["message"].as_str().unwrap_or_default().to_string())
                .filter(|message| message.contains(part))
        },
    )
    .await
}

async fn snapshot_digest(olm: &OlmRun, namespace: &str, name: &str) -> String {
    eventually(&format!("a snapshot of {name}"), WAIT, || async {
        olm.snapshot(namespace, name)
            .and_then(|s| s["digest"].as_str().map(str::to_string))
    })
    .await
}

/// One hostile case: a healthy and a hostile registry server, both first serving our
/// catalog; then the hostile one turns `behaviour` while the healthy one gets new content.
async fn hostile_case(behaviour: Behaviour, type_: &str, reason: &str, says: &str) {
    // Long enough for a flood to reach its limit on a busy machine, short for the rest.
    let load_timeout = if behaviour == Behaviour::Flood {
        "60s"
    } else {
        "5s"
    };
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, &format!("hostile-{}", behaviour.name())).await;
    let catalog = repo_root().join("catalog");
    let hostile = HostileRegistry::start(catalog_index(&catalog, None), Behaviour::Good, 0);
    let healthy = HostileRegistry::start(catalog_index(&catalog, None), Behaviour::Good, 0);
    let olm = OlmRun::start(
        &ns.name,
        &[
            "--leader-elect=false",
            "--catalog-load-timeout",
            load_timeout,
        ],
    );
    for (name, server) in [("hostile", &hostile), ("healthy", &healthy)] {
        apply(&catalog_source_yaml(
            &ns.name,
            name,
            &server.address.to_string(),
            POLL_1S,
        ));
    }
    let good = snapshot_digest(&olm, &ns.name, "hostile").await;
    let healthy_before = snapshot_digest(&olm, &ns.name, "healthy").await;
    let watch = ReadyzWatch::start(olm.admin_port);

    hostile.set(behaviour);
    let loads_before = hostile.list_bundles_calls();
    healthy.serve(catalog_index(&catalog, Some("at")));
    let message = wait_for_failure(&ns.name, "hostile", type_, reason, says).await;
    eprintln!("{}: {type_}: {message}", behaviour.name());

    // The healthy catalog's new content lands meanwhile.
    eventually("the healthy catalog's new content", WAIT, || async {
        olm.snapshot(&ns.name, "healthy")
            .filter(|s| s["digest"] != healthy_before.as_str())
    })
    .await;
    // The hostile source keeps its last good snapshot, and says so.
    let snapshot = olm
        .snapshot(&ns.name, "hostile")
        .expect("the last good snapshot");
    assert_eq!(snapshot["digest"], good.as_str());
    if type_ == "CatalogLoaded" {
        assert!(
            message.contains("still using the last good content"),
            "{message}"
        );
        assert!(hostile.list_bundles_calls() > loads_before);
    }
    let catsrc = get_json(&ns.name, "catalogsource/healthy");
    assert_eq!(condition(&catsrc, "CatalogLoaded")["status"], "True");

    let slowest = watch.finish();
    let mut olm = olm;
    assert!(olm.process.exited().is_none(), "olm run exited");
    let peak = proc_status_mib(olm.process.pid(), "VmHWM");
    record_figure(behaviour.name(), "peak_rss_mib", peak);
    record_figure(
        behaviour.name(),
        "readyz_slowest_ms",
        slowest.as_secs_f64() * 1e3,
    );
    assert!(
        peak < RSS_BOUND_MIB,
        "olm run peaked at {peak:.0} MiB (bound {RSS_BOUND_MIB} MiB)"
    );
}

#[tokio::test]
async fn hostile_registry_that_answers_slowly() {
    hostile_case(
        Behaviour::Slow,
        "CatalogLoaded",
        "LoadFailed",
        "ListBundles (the whole catalog load): no answer within 5s",
    )
    .await;
}

#[tokio::test]
async fn hostile_registry_that_never_answers_a_load() {
    hostile_case(
        Behaviour::Silent,
        "CatalogLoaded",
        "LoadFailed",
        "ListBundles (the whole catalog load): no answer within 5s",
    )
    .await;
}

#[tokio::test]
async fn hostile_registry_that_never_answers_at_all() {
    hostile_case(
        Behaviour::Unresponsive,
        "Connected",
        "ConnectionFailed",
        "Health/Check: no answer within 2s",
    )
    .await;
}

#[tokio::test]
async fn hostile_registry_that_cuts_list_bundles_half_way() {
    hostile_case(
        Behaviour::CutHalfway,
        "CatalogLoaded",
        "LoadFailed",
        "ListBundles",
    )
    .await;
}

#[tokio::test]
async fn hostile_registry_that_sends_a_100_mb_bundle() {
    hostile_case(
        Behaviour::HugeBundle,
        "CatalogLoaded",
        "LoadFailed",
        "the limit on one message is 32 MiB",
    )
    .await;
}

#[tokio::test]
async fn hostile_registry_that_sends_a_million_bundles() {
    hostile_case(
        Behaviour::Flood,
        "CatalogLoaded",
        "LoadFailed",
        "more than 50000 channel entries",
    )
    .await;
}

/// Pseudo-random text (a fixed LCG: the same garbage every run), any char but NUL.
fn garbage(len: usize, seed: u64) -> String {
    let mut state = seed;
    let mut text = String::with_capacity(len + 4);
    while text.len() < len {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let pick = (state >> 33) as u32;
        let c = match pick % 8 {
            // YAML and JSON structure, the most likely to reach deep into a parser.
            0..=2 => ['[', '{', ':', '-', '&', '*', '!', '"', '\'', '\n', ' ', ',']
                [(pick as usize / 8) % 12],
            3 => char::from_u32(0x80 + (pick / 8) % 0xD000).unwrap_or('?'),
            _ => char::from(b' ' + ((pick / 8) % 95) as u8),
        };
        if text.len() + c.len_utf8() <= len {
            text.push(c);
        } else {
            text.push('x');
        }
    }
    text
}

/// Kinds of garbage, each in every key of one ConfigMap.
const GARBAGE_KINDS: [&str; 3] = ["random", "nesting", "aliases"];

/// An alias bomb ("billion laughs"): nine levels of nine references each.
fn alias_bomb() -> String {
    let mut bomb = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in 1..9u8 {
        let previous = (b'a' + level - 1) as char;
        let this = (b'a' + level) as char;
        let refs = vec![format!("*{previous}"); 9].join(",");
        bomb.push_str(&format!("{this}: &{this} [{refs}]\n"));
    }
    bomb
}

/// ConfigMap data whose values add up to exactly `total` bytes (the API server counts the
/// values, not the keys), `kind` garbage in the three keys upstream's format reads and in
/// two more.
fn garbage_data(total: usize, kind: &str) -> serde_json::Map<String, Value> {
    let keys = [
        "customResourceDefinitions",
        "clusterServiceVersions",
        "packages",
        "extra",
        "more",
    ];
    let share = total / keys.len();
    let mut data = serde_json::Map::new();
    for (i, key) in keys.iter().enumerate() {
        let mut value = match kind {
            "random" => garbage(share, i as u64 + 1),
            "nesting" => "[".repeat(share / 2) + &"{a: ".repeat(share / 8),
            _ => alias_bomb(),
        };
        // Pad (a comment) or cut to the share; the first key takes the remainder.
        let want = if i == 0 {
            total - share * (keys.len() - 1)
        } else {
            share
        };
        if value.len() < want {
            value.push('\n');
            while value.len() < want {
                value.push('#');
            }
        }
        while value.len() > want {
            value.pop();
        }
        data.insert(key.to_string(), Value::String(value));
    }
    data
}

fn config_map_json(namespace: &str, name: &str, data: serde_json::Map<String, Value>) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    })
    .to_string()
}

/// The API server takes at most 1 MiB of ConfigMap values (keys are not counted). ConfigMap
/// catalogs of exactly that, garbage in every key (random text, nesting deeper than any
/// parser allows, an alias bomb), are refused with a condition naming the ConfigMap;
/// `olm run` stays ready and its memory stays bounded.
#[tokio::test]
async fn config_map_catalogs_at_the_size_limit_full_of_garbage() {
    const LIMIT: usize = 1 << 20;
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "hostile-configmap").await;

    // One byte over is refused by the API server: the limit is where we think it is.
    let over = kubectl(
        &["create", "-f", "-"],
        Some(&config_map_json(
            &ns.name,
            "over",
            garbage_data(LIMIT + 1, "random"),
        )),
    );
    assert!(!over.success(), "a ConfigMap over 1 MiB was accepted");
    assert!(over.stderr().contains("1048576"), "{}", over.stderr());
    for kind in GARBAGE_KINDS {
        // `create`, not `apply`: apply would copy the data into an annotation (256 KiB).
        kubectl(
            &["create", "-f", "-"],
            Some(&config_map_json(&ns.name, kind, garbage_data(LIMIT, kind))),
        )
        .ok();
    }

    let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let watch = ReadyzWatch::start(olm.admin_port);
    for kind in GARBAGE_KINDS {
        apply(&format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: {kind}\n  namespace: {}\nspec:\n  sourceType: configmap\n  configMap: {kind}\n",
            ns.name
        ));
    }
    for kind in GARBAGE_KINDS {
        // Unclosed `[` and `{` are refused by the linear nesting pre-check: libyaml alone
        // spent ~40 s of CPU on this ConfigMap before its recursion limit answered.
        let message = wait_for_failure_within(
            &ns.name,
            kind,
            "CatalogLoaded",
            "InvalidConfigMap",
            &format!("ConfigMap {}/{kind}", ns.name),
            Duration::from_secs(60),
        )
        .await;
        if kind == "nesting" {
            assert!(
                message.contains("nested more than the limit of 128 levels"),
                "{message}"
            );
        }
        assert!(olm.snapshot(&ns.name, kind).is_none());
    }

    let slowest = watch.finish();
    let mut olm = olm;
    assert!(olm.process.exited().is_none(), "olm run exited");
    let peak = proc_status_mib(olm.process.pid(), "VmHWM");
    record_figure("configmap-garbage", "peak_rss_mib", peak);
    record_figure(
        "configmap-garbage",
        "readyz_slowest_ms",
        slowest.as_secs_f64() * 1e3,
    );
    assert!(
        peak < RSS_BOUND_MIB,
        "olm run peaked at {peak:.0} MiB (bound {RSS_BOUND_MIB} MiB)"
    );
}

/// 100 CatalogSources, 50 of them broken in every way above (and one with nothing
/// listening): each broken one says so, and new content of the healthy server reaches all
/// 50 healthy ones. The time that takes is a figure for the bench.
#[tokio::test]
async fn a_hundred_catalog_sources_half_of_them_broken() {
    many_catalog_sources(50, "100-sources-50-broken").await;
}

/// The same 50 healthy CatalogSources alone: the bench's baseline for the update time.
#[tokio::test]
async fn fifty_healthy_catalog_sources_alone() {
    many_catalog_sources(0, "50-sources-0-broken").await;
}

async fn many_catalog_sources(broken_sources: usize, case: &str) {
    const HEALTHY: usize = 50;
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "hostile-many").await;
    let catalog = repo_root().join("catalog");
    let healthy = HostileRegistry::start(catalog_index(&catalog, None), Behaviour::Good, 0);
    let kinds = [
        Behaviour::Slow,
        Behaviour::Silent,
        Behaviour::Unresponsive,
        Behaviour::CutHalfway,
        Behaviour::HugeBundle,
        Behaviour::Flood,
    ];
    let broken: Vec<HostileRegistry> = kinds
        .iter()
        .map(|&b| HostileRegistry::start(catalog_index(&catalog, None), b, 0))
        .collect();
    let refused = format!("127.0.0.1:{}", free_port());

    // 50 loads at once from one test-process server on 2 shared cores need more than 5 s.
    let olm = OlmRun::start(
        &ns.name,
        &["--leader-elect=false", "--catalog-load-timeout", "20s"],
    );
    let watch = ReadyzWatch::start(olm.admin_port);
    let mut yaml = String::new();
    for i in 0..HEALTHY {
        let address = healthy.address.to_string();
        yaml.push_str(&catalog_source_yaml(
            &ns.name,
            &format!("healthy-{i}"),
            &address,
            POLL_1S,
        ));
        yaml.push_str("---\n");
    }
    for i in 0..broken_sources {
        let address = match broken.get(i % (kinds.len() + 1)) {
            Some(server) => server.address.to_string(),
            None => refused.clone(),
        };
        // Retried after each failure (every 6 check intervals), not polled every second.
        yaml.push_str(&catalog_source_yaml(
            &ns.name,
            &format!("broken-{i}"),
            &address,
            "",
        ));
        yaml.push_str("---\n");
    }
    apply(&yaml);

    // Every healthy one loads; every broken one says why not.
    let first = snapshot_digest(&olm, &ns.name, "healthy-0").await;
    eventually("all healthy catalogs loaded", WAIT, || async {
        let catalogs = olm.catalogs();
        let loaded = catalogs
            .as_array()?
            .iter()
            .filter(|s| s["digest"] == first.as_str())
            .count();
        (loaded == HEALTHY).then_some(())
    })
    .await;
    eventually("every broken catalog reports a failure", WAIT, || async {
        let list = get_json(&ns.name, "catalogsources");
        let failing = list["items"]
            .as_array()?
            .iter()
            .filter(|c| {
                c["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("broken-"))
            })
            .filter(|c| {
                c["status"]["conditions"]
                    .as_array()
                    .is_some_and(|conditions| {
                        conditions.iter().any(|x| {
                            (x["type"] == "Connected" || x["type"] == "CatalogLoaded")
                                && x["status"] == "False"
                        })
                    })
            })
            .count();
        (failing == broken_sources).then_some(())
    })
    .await;

    // New content: the time until the first and the last healthy source use it.
    let started = Instant::now();
    healthy.serve(catalog_index(&catalog, Some("at")));
    let first_update = eventually("a healthy catalog updated", WAIT, || async {
        olm.snapshot(&ns.name, "healthy-0")
            .filter(|s| s["digest"] != first.as_str())
            .map(|_| started.elapsed())
    })
    .await;
    let all_updated = eventually("all healthy catalogs updated", WAIT, || async {
        let catalogs = olm.catalogs();
        let stale = catalogs
            .as_array()?
            .iter()
            .filter(|s| {
                s["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("healthy-"))
            })
            .filter(|s| s["digest"] == first.as_str())
            .count();
        (stale == 0).then(|| started.elapsed())
    })
    .await;

    let slowest = watch.finish();
    let mut olm = olm;
    assert!(olm.process.exited().is_none(), "olm run exited");
    let peak = proc_status_mib(olm.process.pid(), "VmHWM");
    record_figure(case, "peak_rss_mib", peak);
    record_figure(
        case,
        "rss_now_mib",
        proc_status_mib(olm.process.pid(), "VmRSS"),
    );
    record_figure(case, "readyz_slowest_ms", slowest.as_secs_f64() * 1e3);
    record_figure(
        case,
        "first_healthy_update_ms",
        first_update.as_secs_f64() * 1e3,
    );
    record_figure(
        case,
        "all_healthy_updated_ms",
        all_updated.as_secs_f64() * 1e3,
    );
    assert!(
        peak < MANY_RSS_BOUND_MIB,
        "olm run peaked at {peak:.0} MiB (bound {MANY_RSS_BOUND_MIB} MiB)"
    );
}
