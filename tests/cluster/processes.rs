//! Processes the cluster tests start: `olm run` against the test cluster, and catalog
//! servers (`olm catalog serve`, upstream `opm serve`). Each is killed when its guard drops,
//! also when a test panics; logs go to `target/cluster/logs/` so a failure can be read.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub use super::common::free_port;
use super::harness::{kubeconfig_path, olm_bin, repo_root};

fn log_file(name: &str) -> (std::fs::File, PathBuf) {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let dir = repo_root().join("target/cluster/logs/tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!(
        "{name}-{}-{}.log",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    (std::fs::File::create(&path).unwrap(), path)
}

pub struct Process {
    child: Child,
    pub name: String,
    pub log: PathBuf,
}

impl Process {
    pub fn spawn(name: &str, command: &mut Command) -> Process {
        let (log, path) = log_file(name);
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Process {
            child,
            name: name.to_string(),
            log: path,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// SIGKILL: the process gets no chance to clean up (a crashed or partitioned replica).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits for the exit.
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {timeout:?} of SIGTERM; log: {}",
                self.name,
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            // A failed test shows what the process last said (CI keeps no scratch files).
            let text = self.log_text();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            eprintln!("--- last lines of {} ({}):", self.name, self.log.display());
            for line in tail {
                eprintln!("{line}");
            }
        }
    }
}

/// Waits until something accepts connections on the port.
pub fn wait_for_port(process: &mut Process, port: u16, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = process.exited() {
            panic!(
                "{} exited ({status}) before listening on {port}:\n{}",
                process.name,
                process.log_text()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{} is not listening on {port} after {timeout:?}",
            process.name
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `olm catalog serve DIR` on a loopback port, ready when this returns.
pub fn olm_serve(dir: &Path, port: u16) -> Process {
    let mut process = Process::spawn(
        "olm-serve",
        Command::new(olm_bin()).args([
            "catalog",
            "serve",
            dir.to_str().unwrap(),
            "--address",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ]),
    );
    wait_for_port(&mut process, port, Duration::from_secs(60));
    process
}

/// Upstream `opm serve DIR` (built by hack/opm/build; `OLM_OPM` names it in hack/test).
pub fn opm_serve(dir: &Path, port: u16) -> Process {
    let mut process = Process::spawn(
        "opm-serve",
        Command::new(super::common::opm())
            .env_remove("OLM_CACHE_DIR")
            .args([
                "serve",
                dir.to_str().unwrap(),
                "--port",
                &port.to_string(),
                "--pprof-addr",
                "",
                "-t",
                "/dev/null",
            ]),
    );
    wait_for_port(&mut process, port, Duration::from_secs(120));
    process
}

/// An `olm run` process against the test cluster, with its admin server on `admin_port`.
pub struct OlmRun {
    pub process: Process,
    pub admin_port: u16,
    /// Held while a process started with `--disable-copied-csvs` runs: it counts on the
    /// test cluster's OLMConfig keeping copies off (see `harness::olm_config_lock`).
    /// Released after the process is stopped (fields drop in order).
    _copies_off: Option<std::fs::File>,
}

/// The shared lock of a process that counts on copied CSVs being off.
fn copies_off(extra: &[impl AsRef<str>]) -> Option<std::fs::File> {
    extra
        .iter()
        .any(|flag| flag.as_ref() == "--disable-copied-csvs")
        .then(|| crate::harness::olm_config_lock(false))
}

impl OlmRun {
    /// Starts `olm run --watch-namespace NS` with a fast check interval plus `extra` flags,
    /// and waits until its admin server answers.
    pub fn start(namespace: &str, extra: &[&str]) -> OlmRun {
        Self::start_with(&kubeconfig_path(), namespace, extra)
    }

    /// As [`OlmRun::start`], with more environment variables.
    pub fn start_env(namespace: &str, extra: &[&str], env: &[(&str, &str)]) -> OlmRun {
        Self::launch(&kubeconfig_path(), namespace, extra, env)
    }

    /// As [`OlmRun::start`], with another kubeconfig (another identity).
    pub fn start_with(kubeconfig: &Path, namespace: &str, extra: &[&str]) -> OlmRun {
        Self::launch(kubeconfig, namespace, extra, &[])
    }

    /// As [`OlmRun::start_with`], but the binary deploy/operator.yaml runs: `olm-operator`,
    /// which takes `olm run`'s flags without the subcommand.
    pub fn start_deployed_binary(kubeconfig: &Path, namespace: &str, extra: &[&str]) -> OlmRun {
        let mut command = Command::new(env!("CARGO_BIN_EXE_olm-operator"));
        command.env("KUBECONFIG", kubeconfig);
        Self::launch_command(command, namespace, extra)
    }

    /// `olm run` over every namespace (no `--watch-namespace`), with `extra` flags.
    pub fn start_cluster_wide(extra: &[&str]) -> OlmRun {
        Self::cluster_wide(&without_packages(extra))
    }

    /// As [`OlmRun::start_cluster_wide`], serving packagemanifests as `olm run` does by
    /// default (registering the APIService: hold `packagemanifests::TURN`).
    pub fn start_cluster_wide_with_packages(extra: &[&str]) -> OlmRun {
        Self::cluster_wide(extra)
    }

    fn cluster_wide(extra: &[&str]) -> OlmRun {
        let copies_off = copies_off(extra);
        let admin_port = free_port();
        let mut process = Process::spawn(
            "olm-run",
            Command::new(olm_bin())
                .env("KUBECONFIG", kubeconfig_path())
                .env("RUST_LOG", "info,olm=debug")
                .args(["run", "--admin-address", &format!("127.0.0.1:{admin_port}")])
                .args(["--catalog-check-interval", "1s", "--registry-timeout", "2s"])
                .args(extra),
        );
        wait_for_port(&mut process, admin_port, Duration::from_secs(60));
        OlmRun {
            process,
            admin_port,
            _copies_off: copies_off,
        }
    }

    fn launch(kubeconfig: &Path, namespace: &str, extra: &[&str], env: &[(&str, &str)]) -> OlmRun {
        let mut command = Command::new(olm_bin());
        command
            .envs(env.iter().copied())
            .env("KUBECONFIG", kubeconfig)
            .arg("run");
        Self::launch_command(command, namespace, extra)
    }

    fn launch_command(mut command: Command, namespace: &str, extra: &[&str]) -> OlmRun {
        let extra = without_packages(extra);
        let copies_off = copies_off(&extra);
        let admin_port = free_port();
        let mut process = Process::spawn(
            "olm-run",
            command
                .env("RUST_LOG", "info,olm=debug")
                .args([
                    "--admin-address",
                    &format!("127.0.0.1:{admin_port}"),
                    "--watch-namespace",
                    namespace,
                    "--catalog-check-interval",
                    "1s",
                    "--registry-timeout",
                    "2s",
                ])
                .args(&extra),
        );
        wait_for_port(&mut process, admin_port, Duration::from_secs(60));
        OlmRun {
            process,
            admin_port,
            _copies_off: copies_off,
        }
    }

    /// `GET path` on the admin server: `(status code, body)`, or None if it does not answer.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.admin_port, path)
    }

    /// The value of an unlabelled metric (or of the first series whose line starts so).
    pub fn metric(&self, series: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics")?;
        body.lines()
            .find(|line| line.starts_with(series) && line[series.len()..].starts_with(' '))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
    }

    /// `/debug/catalogs`, as JSON.
    pub fn catalogs(&self) -> serde_json::Value {
        let (code, body) = self.get("/debug/catalogs").expect("admin server answers");
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// The snapshot of one CatalogSource, if the process holds one.
    pub fn snapshot(&self, namespace: &str, name: &str) -> Option<serde_json::Value> {
        self.catalogs()
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["namespace"] == namespace && s["name"] == name)
            .cloned()
    }
}

/// A minimal HTTP/1.0 GET, enough for the admin server.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

/// `extra` with `--packages-address off` unless it sets the address: many `olm run` at once
/// must not all register the one packagemanifests APIService.
fn without_packages<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut flags = extra.to_vec();
    if !extra.iter().any(|f| f.starts_with("--packages-address")) {
        flags.extend(["--packages-address", "off"]);
    }
    flags
}
