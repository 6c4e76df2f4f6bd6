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
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a loopback port and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (black_hole, cut) = watch::channel(false);
        let accept = tokio::spawn(async move {
            // Dropping the set (when the proxy is dropped) closes every connection.
            let mut connections = JoinSet::new();
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                connections.spawn(forward(client, upstream, cut.clone()));
            }
        });
        Proxy {
            address,
            black_hole,
            accept,
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
        self.accept.abort();
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
