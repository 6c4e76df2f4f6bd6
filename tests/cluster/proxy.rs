//! A TCP proxy in the test process between one `olm run` and the API server, which a test
//! can black-hole: it stops forwarding bytes but keeps every socket open, so the process's
//! calls hang rather than fail (a partition, or an API server that stopped answering).

use std::net::SocketAddr;
use std::path::PathBuf;

use kube::config::Kubeconfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::harness::{kubeconfig_path, repo_root};

pub struct Proxy {
    pub address: SocketAddr,
    black_hole: watch::Sender<bool>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Listens on a loopback port and forwards every connection to `upstream`, from a
    /// thread and runtime of its own (tests block their own thread in many places).
    pub fn start(upstream: SocketAddr) -> Proxy {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let address = std_listener.local_addr().unwrap();
        let (black_hole, cut) = watch::channel(false);
        let (stop, mut stopped) = watch::channel(false);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                // Dropped with the runtime when the proxy stops: every connection closes.
                let mut connections = JoinSet::new();
                loop {
                    tokio::select! {
                        _ = stopped.wait_for(|stop| *stop) => break,
                        accepted = listener.accept() => {
                            if let Ok((client, _)) = accepted {
                                connections.spawn(forward(client, upstream, cut.clone()));
                            }
                        }
                    }
                }
            });
        });
        Proxy {
            address,
            black_hole,
            stop,
            thread: Some(thread),
        }
    }

    /// From now on no byte passes in either direction, on open and new connections alike;
    /// nothing is closed either.
    pub fn black_hole(&self) {
        self.black_hole.send_replace(true);
    }

    /// A copy of the test cluster's kubeconfig whose servers are this proxy.
    pub fn kubeconfig(&self) -> PathBuf {
        let mut config = Kubeconfig::read_from(kubeconfig_path()).expect("test cluster kubeconfig");
        for cluster in &mut config.clusters {
            if let Some(cluster) = cluster.cluster.as_mut() {
                cluster.server = Some(format!("https://{}", self.address));
            }
        }
        let dir = repo_root().join("target/cluster/proxied");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("kubeconfig-{}", self.address.port()));
        // JSON is YAML; Kubeconfig::read_from made the certificate paths absolute.
        std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
        path
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The API server's address, from the test cluster's kubeconfig.
pub fn api_server() -> SocketAddr {
    let config = Kubeconfig::read_from(kubeconfig_path()).expect("test cluster kubeconfig");
    let server = config
        .clusters
        .iter()
        .find_map(|c| c.cluster.as_ref()?.server.clone())
        .expect("a server in the kubeconfig");
    let authority = server
        .strip_prefix("https://")
        .unwrap_or(&server)
        .trim_end_matches('/');
    authority
        .parse()
        .unwrap_or_else(|e| panic!("server {server} is not https://IP:PORT: {e}"))
}

async fn forward(client: TcpStream, upstream: SocketAddr, cut: watch::Receiver<bool>) {
    if *cut.borrow() {
        hold(client).await;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        pump(client_read, server_write, cut.clone()),
        pump(server_read, client_write, cut),
    );
}

/// Copies bytes until EOF, or until the black hole opens: then it parks, holding both
/// halves open, and bytes read in the same instant are dropped.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut cut: watch::Receiver<bool>) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = tokio::select! {
            biased;
            _ = cut.wait_for(|cut| *cut) => break,
            read = from.read(&mut buffer) => read,
        };
        let n = match read {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if *cut.borrow() {
            break;
        }
        tokio::select! {
            biased;
            _ = cut.wait_for(|cut| *cut) => break,
            written = to.write_all(&buffer[..n]) => if written.is_err() { return },
        }
    }
    hold((from, to)).await;
}

async fn hold<T>(sockets: T) -> ! {
    let _sockets = sockets;
    std::future::pending().await
}
