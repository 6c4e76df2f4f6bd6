//! A registry server that misbehaves on request, for the hostile-catalog tests (which
//! `hack/bench/hostile.py` runs for its figures). It speaks `api.Registry`
//! with the same generated code as `olm catalog serve`, over a real catalog index, and
//! answers correctly until told to do otherwise: answer slowly, never answer, cut the
//! connection in the middle of `ListBundles`, send a 100 MB bundle or a million bundles.
//!
//! It runs on a thread and runtime of its own (tests block their thread in many places).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use olm::registry::generated as api;
use olm::registry::generated::registry_server::{Registry, RegistryServer};
use olm::registry::server::RegistryService;
use olm::registry::{AlwaysServing, Index};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::{Request, Response, Status};

/// What the server does with the next calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers every call correctly from its index.
    Good = 0,
    /// Health checks answer at once; every other answer (each `ListBundles` message) comes
    /// after a second, and `ListBundles` repeats its entries without end.
    Slow,
    /// Health checks answer; `ListBundles`, `GetPackage` and `GetBundle` never do.
    Silent,
    /// Every connection stops reading and writing (health checks included), sockets open.
    Unresponsive,
    /// `ListBundles` sends half of the entries, then the TCP connection breaks.
    CutHalfway,
    /// `ListBundles` sends the catalog, then a bundle of 100 MB.
    HugeBundle,
    /// `ListBundles` sends the catalog, then a million more bundles.
    Flood,
}

impl Behaviour {
    pub const ALL: [Behaviour; 7] = [
        Behaviour::Good,
        Behaviour::Slow,
        Behaviour::Silent,
        Behaviour::Unresponsive,
        Behaviour::CutHalfway,
        Behaviour::HugeBundle,
        Behaviour::Flood,
    ];

    fn from_u8(v: u8) -> Behaviour {
        Self::ALL
            .get(usize::from(v))
            .copied()
            .unwrap_or(Behaviour::Good)
    }

    pub fn name(self) -> &'static str {
        match self {
            Behaviour::Good => "good",
            Behaviour::Slow => "slow",
            Behaviour::Silent => "silent",
            Behaviour::Unresponsive => "unresponsive",
            Behaviour::CutHalfway => "cut-halfway",
            Behaviour::HugeBundle => "huge-bundle",
            Behaviour::Flood => "flood",
        }
    }
}

pub const HUGE_BUNDLE_BYTES: usize = 100 << 20;
pub const FLOOD_BUNDLES: usize = 1_000_000;
const SLOW_DELAY: Duration = Duration::from_secs(1);

/// State shared by the service and the connections.
struct Shared {
    behaviour: AtomicU8,
    index: RwLock<Arc<Index>>,
    /// Connections accepted before the last cut fail their next read or write.
    cut_epoch: AtomicU64,
    /// Connections parked by [`Behaviour::Unresponsive`], woken when that ends.
    parked: Mutex<Vec<Waker>>,
    list_bundles_calls: AtomicUsize,
}

impl Shared {
    fn behaviour(&self) -> Behaviour {
        Behaviour::from_u8(self.behaviour.load(Ordering::Acquire))
    }

    fn index(&self) -> Arc<Index> {
        Arc::clone(&self.index.read().unwrap())
    }

    fn service(&self) -> RegistryService {
        RegistryService::new(self.index())
    }
}

pub struct HostileRegistry {
    pub address: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HostileRegistry {
    /// Serves `index` on a loopback port (`port` 0: any free one), behaving as told.
    pub fn start(index: Index, behaviour: Behaviour, port: u16) -> HostileRegistry {
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let address = std_listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            behaviour: AtomicU8::new(behaviour as u8),
            index: RwLock::new(Arc::new(index)),
            cut_epoch: AtomicU64::new(0),
            parked: Mutex::new(Vec::new()),
            list_bundles_calls: AtomicUsize::new(0),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = Arc::clone(&shared);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                let incoming = futures::stream::unfold(
                    (listener, Arc::clone(&serving)),
                    |(listener, shared)| async move {
                        let accepted = listener.accept().await.map(|(stream, _)| {
                            let _ = stream.set_nodelay(true);
                            Connection {
                                epoch: shared.cut_epoch.load(Ordering::Acquire),
                                stream,
                                shared: Arc::clone(&shared),
                            }
                        });
                        Some((accepted, (listener, shared)))
                    },
                );
                let _ = tonic::transport::Server::builder()
                    .add_service(RegistryServer::new(Hostile { shared: serving }))
                    .add_service(tonic_health::pb::health_server::HealthServer::new(
                        AlwaysServing,
                    ))
                    .serve_with_incoming_shutdown(incoming, async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        HostileRegistry {
            address,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn set(&self, behaviour: Behaviour) {
        self.shared
            .behaviour
            .store(behaviour as u8, Ordering::Release);
        if behaviour != Behaviour::Unresponsive {
            for waker in self.shared.parked.lock().unwrap().drain(..) {
                waker.wake();
            }
        }
    }

    /// New content, answered from the next call on.
    pub fn serve(&self, index: Index) {
        *self.shared.index.write().unwrap() = Arc::new(index);
    }

    /// `ListBundles` calls so far: each is one catalog load by a client.
    pub fn list_bundles_calls(&self) -> usize {
        self.shared.list_bundles_calls.load(Ordering::Acquire)
    }
}

impl Drop for HostileRegistry {
    fn drop(&mut self) {
        // Parked connections must wake to see the shutdown.
        self.set(Behaviour::Good);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // The runtime goes with the thread; open streams are dropped with it.
        drop(self.thread.take());
    }
}

/// One accepted connection: it breaks after a cut and hangs while unresponsive.
struct Connection {
    stream: TcpStream,
    epoch: u64,
    shared: Arc<Shared>,
}

enum Gate {
    Open,
    Cut,
    Hang,
}

impl Connection {
    fn gate(&self, cx: &Context<'_>) -> Gate {
        if self.shared.cut_epoch.load(Ordering::Acquire) > self.epoch {
            return Gate::Cut;
        }
        if self.shared.behaviour() == Behaviour::Unresponsive {
            self.shared.parked.lock().unwrap().push(cx.waker().clone());
            return Gate::Hang;
        }
        Gate::Open
    }
}

fn reset() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "cut by the hostile registry",
    )
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.gate(cx) {
            Gate::Open => Pin::new(&mut self.stream).poll_read(cx, buf),
            Gate::Cut => Poll::Ready(Err(reset())),
            Gate::Hang => Poll::Pending,
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.gate(cx) {
            Gate::Open => Pin::new(&mut self.stream).poll_write(cx, buf),
            Gate::Cut => Poll::Ready(Err(reset())),
            Gate::Hang => Poll::Pending,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Connection {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

type Stream<T> = Pin<Box<dyn futures::Stream<Item = Result<T, Status>> + Send + 'static>>;

struct Hostile {
    shared: Arc<Shared>,
}

impl Hostile {
    /// Waits as the behaviour asks before a unary answer.
    async fn stall(&self) {
        match self.shared.behaviour() {
            Behaviour::Slow => tokio::time::sleep(SLOW_DELAY).await,
            Behaviour::Silent => std::future::pending().await,
            _ => {}
        }
    }
}

fn extra_bundle(package: &str, i: usize, csv_json: String) -> api::Bundle {
    let version = format!("0.0.{i}");
    api::Bundle {
        csv_name: format!("{package}.v{version}"),
        package_name: package.to_string(),
        channel_name: "stable".to_string(),
        version,
        csv_json,
        ..api::Bundle::default()
    }
}

fn entries(index: Arc<Index>) -> impl Iterator<Item = Result<api::Bundle, Status>> {
    (0..index.entry_count()).map(move |i| index.list_bundle(i).map_err(|e| Status::unknown(e.0)))
}

#[tonic::async_trait]
impl Registry for Hostile {
    type ListPackagesStream = Stream<api::PackageName>;
    type GetChannelEntriesThatReplaceStream = Stream<api::ChannelEntry>;
    type GetChannelEntriesThatProvideStream = Stream<api::ChannelEntry>;
    type GetLatestChannelEntriesThatProvideStream = Stream<api::ChannelEntry>;
    type ListBundlesStream = Stream<api::Bundle>;

    async fn list_bundles(
        &self,
        _: Request<api::ListBundlesRequest>,
    ) -> Result<Response<Self::ListBundlesStream>, Status> {
        self.shared
            .list_bundles_calls
            .fetch_add(1, Ordering::AcqRel);
        let index = self.shared.index();
        let n = index.entry_count();
        let stream: Self::ListBundlesStream = match self.shared.behaviour() {
            Behaviour::Good | Behaviour::Unresponsive => {
                Box::pin(futures::stream::iter(entries(index)))
            }
            Behaviour::Slow => Box::pin(futures::stream::unfold(0usize, move |i| {
                let index = Arc::clone(&index);
                async move {
                    tokio::time::sleep(SLOW_DELAY).await;
                    let item = index
                        .list_bundle(i % n.max(1))
                        .map_err(|e| Status::unknown(e.0));
                    Some((item, i + 1))
                }
            })),
            Behaviour::Silent => Box::pin(futures::stream::pending()),
            Behaviour::CutHalfway => {
                let shared = Arc::clone(&self.shared);
                Box::pin(futures::stream::iter(entries(index).enumerate().map(
                    move |(i, item)| {
                        if i == n / 2 {
                            shared.cut_epoch.fetch_add(1, Ordering::AcqRel);
                        }
                        item
                    },
                )))
            }
            Behaviour::HugeBundle => Box::pin(futures::stream::iter(entries(index).chain(
                std::iter::once_with(|| Ok(extra_bundle("huge", 1, "x".repeat(HUGE_BUNDLE_BYTES)))),
            ))),
            Behaviour::Flood => Box::pin(futures::stream::iter(
                entries(index)
                    .chain((0..FLOOD_BUNDLES).map(|i| Ok(extra_bundle("flood", i, String::new())))),
            )),
        };
        Ok(Response::new(stream))
    }

    async fn get_package(
        &self,
        r: Request<api::GetPackageRequest>,
    ) -> Result<Response<api::Package>, Status> {
        self.stall().await;
        self.shared.service().get_package(r).await
    }

    async fn get_bundle(
        &self,
        r: Request<api::GetBundleRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        self.stall().await;
        self.shared.service().get_bundle(r).await
    }

    async fn list_packages(
        &self,
        r: Request<api::ListPackageRequest>,
    ) -> Result<Response<Self::ListPackagesStream>, Status> {
        self.stall().await;
        self.shared.service().list_packages(r).await
    }

    async fn get_bundle_for_channel(
        &self,
        r: Request<api::GetBundleInChannelRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        self.stall().await;
        self.shared.service().get_bundle_for_channel(r).await
    }

    async fn get_channel_entries_that_replace(
        &self,
        r: Request<api::GetAllReplacementsRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatReplaceStream>, Status> {
        self.stall().await;
        self.shared
            .service()
            .get_channel_entries_that_replace(r)
            .await
    }

    async fn get_bundle_that_replaces(
        &self,
        r: Request<api::GetReplacementRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        self.stall().await;
        self.shared.service().get_bundle_that_replaces(r).await
    }

    async fn get_channel_entries_that_provide(
        &self,
        r: Request<api::GetAllProvidersRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatProvideStream>, Status> {
        self.stall().await;
        self.shared
            .service()
            .get_channel_entries_that_provide(r)
            .await
    }

    async fn get_latest_channel_entries_that_provide(
        &self,
        r: Request<api::GetLatestProvidersRequest>,
    ) -> Result<Response<Self::GetLatestChannelEntriesThatProvideStream>, Status> {
        self.stall().await;
        self.shared
            .service()
            .get_latest_channel_entries_that_provide(r)
            .await
    }

    async fn get_default_bundle_that_provides(
        &self,
        r: Request<api::GetDefaultProviderRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        self.stall().await;
        self.shared
            .service()
            .get_default_bundle_that_provides(r)
            .await
    }
}

/// The index of a catalog directory, optionally without one package (new content for a
/// server to switch to).
pub fn catalog_index(dir: &std::path::Path, without: Option<&str>) -> Index {
    let mut config = olm::catalog::reading::load::load_path(dir).unwrap();
    if let Some(package) = without {
        config.packages.retain(|p| p.name != package);
        config.channels.retain(|c| c.package != package);
        config.bundles.retain(|b| b.package != package);
        config.deprecations.retain(|d| d.package != package);
    }
    Index::from_config(config).unwrap()
}
