//! A real registry for tests: Debian's docker-registry (distribution 2.8), put in a cache by
//! `hack/registry/install`, on 127.0.0.1 with a free port and filesystem storage in a temp
//! dir; optionally with htpasswd basic auth. Killed when dropped.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The test user and its bcrypt hash (made once with `crypt.METHOD_BLOWFISH`).
pub const USER: &str = "olm";
pub const PASSWORD: &str = "s3cret";
const PASSWORD_BCRYPT: &str = "$2b$12$bIaS.0152vzd0SIvMml1L.jEr/.qI4O8..20U4U6qDZUG5JHzUhSi";

pub struct TestRegistry {
    child: Child,
    /// `127.0.0.1:PORT`
    pub host: String,
    pub dir: PathBuf,
    pub log: PathBuf,
}

fn binary() -> PathBuf {
    let out = Command::new(crate::common::repo().join("hack/registry/install"))
        .output()
        .expect("hack/registry/install runs");
    assert!(
        out.status.success(),
        "hack/registry/install failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(stdout.lines().last().unwrap().trim())
}

impl TestRegistry {
    pub fn start(name: &str, with_auth: bool) -> TestRegistry {
        Self::start_in(
            &crate::common::scratch(&format!("registry-{name}")),
            with_auth,
            None,
        )
    }

    /// Starts on `port` (0 for any) with storage under `dir`: a restart on the same port
    /// keeps the content (a registry that was down and came back).
    pub fn start_in(dir: &Path, with_auth: bool, port: Option<u16>) -> TestRegistry {
        std::fs::create_dir_all(dir.join("storage")).unwrap();
        let auth = if with_auth {
            let htpasswd = dir.join("htpasswd");
            std::fs::write(&htpasswd, format!("{USER}:{PASSWORD_BCRYPT}\n")).unwrap();
            format!(
                "auth: {{htpasswd: {{realm: test, path: {}}}}}\n",
                htpasswd.display()
            )
        } else {
            String::new()
        };
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{level: info, accesslog: {{disabled: false}}}}\n\
                 storage: {{filesystem: {{rootdirectory: {}}}, delete: {{enabled: true}}}}\n\
                 http: {{addr: 127.0.0.1:{}, secret: fixed}}\n{auth}",
                dir.join("storage").display(),
                port.unwrap_or(0)
            ),
        )
        .unwrap();
        let log = dir.join(format!("registry-{}.log", port.unwrap_or(0)));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(binary())
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("docker-registry starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        let host = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(at) = text.find("listening on ") {
                let rest = &text[at + "listening on ".len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ':'))
                    .unwrap_or(rest.len());
                break rest[..end].to_string();
            }
            assert!(
                Instant::now() < deadline,
                "docker-registry did not start: {text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        TestRegistry {
            child,
            host,
            dir: dir.to_path_buf(),
            log,
        }
    }

    pub fn port(&self) -> u16 {
        self.host.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// The registry's log so far.
    pub fn log_text(&self) -> String {
        let mut text = String::new();
        std::fs::File::open(&self.log)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    /// Requests with this method whose path contains `fragment`, from the access log.
    pub fn requests(&self, method: &str, fragment: &str) -> usize {
        self.log_text()
            .lines()
            .filter(|l| l.contains(&format!("\"{method} ")) && l.contains(fragment))
            .count()
    }

    /// A docker config.json with the test user for this registry (for REGISTRY_AUTH_FILE).
    pub fn auth_file(&self, password: &str) -> PathBuf {
        use base64::Engine;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
        let path = self.dir.join(format!("auth-{password}.json"));
        std::fs::write(
            &path,
            format!(r#"{{"auths":{{"{}":{{"auth":"{token}"}}}}}}"#, self.host),
        )
        .unwrap();
        path
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A HOME for upstream opm: containers/image refuses to pull without a policy.json.
pub fn opm_home(dir: &Path) -> PathBuf {
    let home = dir.join("opm-home");
    std::fs::create_dir_all(home.join(".config/containers")).unwrap();
    std::fs::write(
        home.join(".config/containers/policy.json"),
        r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
    )
    .unwrap();
    home
}
