//! Proxies for the pulls `olm run` makes itself (issue 43): with `HTTP_PROXY` on its
//! environment, a catalog image and its bundle images under a name that only the proxy can
//! reach (`proxied.invalid` never resolves) are pulled through a small forward proxy in
//! this test; a registry listed in `NO_PROXY` is asked directly (and so fails to resolve),
//! and a loopback registry is never proxied, as Go's `httpproxy` decides.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::harness::{TestNamespace, client, install_crds};
use super::image_installs::{catalog_source, installed, setup_namespace, subscribe};
use super::mirrors::{connected, mirrored_catalog};
use super::processes::OlmRun;
use super::registry::TestRegistry;

/// An HTTP forward proxy that sends every connection to one upstream and keeps the
/// request line of each connection's first request (`GET http://host/path HTTP/1.1`).
struct ForwardProxy {
    address: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl ForwardProxy {
    fn start(upstream: SocketAddr) -> ForwardProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, stopped) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let log = log.clone();
                if let Ok(client) = client {
                    std::thread::spawn(move || relay(client, upstream, &log));
                }
            }
        });
        ForwardProxy {
            address,
            seen,
            stop,
        }
    }

    fn requests_for(&self, host: &str) -> Vec<String> {
        let prefix = format!("http://{host}/");
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|line| {
                line.split(' ')
                    .nth(1)
                    .is_some_and(|u| u.starts_with(&prefix))
            })
            .cloned()
            .collect()
    }

    fn all(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        TcpStream::connect(self.address).ok(); // wakes the accept loop
    }
}

/// Copies bytes both ways and records each request line on the way up: pulls send GET and
/// HEAD requests without bodies, so a request starts after each blank line. The registry
/// (Go's net/http) takes the absolute-form request URIs a proxy client sends.
fn relay(client: TcpStream, upstream: SocketAddr, log: &Mutex<Vec<String>>) {
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    let mut back = server.try_clone().unwrap();
    let mut to_client = client.try_clone().unwrap();
    let down = std::thread::spawn(move || {
        std::io::copy(&mut back, &mut to_client).ok();
        to_client.shutdown(Shutdown::Both).ok();
    });
    let mut reader = BufReader::new(client);
    let mut starts_request = true;
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 0 {
        if starts_request {
            log.lock().unwrap().push(line.trim_end().to_string());
        }
        starts_request = line == "\r\n";
        if server.write_all(line.as_bytes()).is_err() {
            break;
        }
        line.clear();
    }
    server.shutdown(Shutdown::Write).ok();
    down.join().ok();
}

#[tokio::test]
async fn pulls_go_through_the_proxy_the_environment_names_except_no_proxy_and_loopback() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "pull-proxy").await;
    let registry = TestRegistry::start("pull-proxy", false);
    let work = registry.dir.clone();
    // The catalog names its bundles under a host only the proxy reaches.
    mirrored_catalog(&registry, "proxied.invalid/olm");
    let image = format!("{}/olm/mirrored:latest", registry.host);

    let proxy = ForwardProxy::start(registry.host.parse().unwrap());
    let proxy_url = format!("http://{}", proxy.address);
    let _olm = OlmRun::start_env(
        &ns.name,
        &[
            "--leader-elect=false",
            "--image-cache-dir",
            work.join("cache").to_str().unwrap(),
            "--insecure-registry",
            "proxied.invalid",
            "--insecure-registry",
            "exempt.invalid",
        ],
        &[
            ("HTTP_PROXY", proxy_url.as_str()),
            ("NO_PROXY", "exempt.invalid"),
        ],
    );
    setup_namespace(&ns.name, &registry, "");
    catalog_source(&ns.name, "proxied", "proxied.invalid/olm/mirrored:latest");
    subscribe(&ns.name, "proxied");
    installed(&ns.name, "reverse-words.v0.2.0").await;
    let catalog = proxy.requests_for("proxied.invalid");
    let asked = |fragment: &str| catalog.iter().any(|line| line.contains(fragment));
    assert!(
        asked("/v2/olm/mirrored/"),
        "the catalog came through the proxy: {catalog:?}"
    );
    assert!(
        asked("/v2/olm/reverse-words-bundle/"),
        "the bundle came through the proxy: {catalog:?}"
    );

    // NO_PROXY: asked directly, so the name does not resolve; the proxy never sees it.
    catalog_source(&ns.name, "exempt", "exempt.invalid/olm/mirrored:latest");
    let refused = connected(&ns.name, "exempt", "False").await["message"].to_string();
    assert!(refused.contains("exempt.invalid"), "{refused}");
    assert_eq!(proxy.requests_for("exempt.invalid"), Vec::<String>::new());

    // Loopback: never proxied, whatever NO_PROXY says.
    catalog_source(&ns.name, "loopback", &image);
    connected(&ns.name, "loopback", "True").await;
    let direct = proxy.requests_for(&registry.host);
    assert!(direct.is_empty(), "{:?}", proxy.all());
}
