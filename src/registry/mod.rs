//! `olm catalog serve`: the operator-registry gRPC API (`api.Registry`, as `opm serve`
//! speaks it) over a file-based catalog, plus `grpc.health.v1` and server reflection.
//!
//! [`index::Index`] holds what the RPCs need, built once at startup; the manifests stay in
//! a spill file. [`server`] maps the RPCs onto it with upstream's quirks. The protobuf code
//! is generated from `proto/registry.proto` and checked in ([`generated`]).

pub mod client;
pub mod convert;
pub mod generated;
pub mod index;
pub mod limits;
pub mod server;
mod store;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

pub use index::Index;
use index::{IndexBuildError, IndexCacheError};

/// Why `olm catalog serve` could not load or serve its catalog.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("building the reflection service")]
    Reflection(#[source] tonic_reflection::server::Error),
    #[error("loading catalog {}", dir.display())]
    Load {
        dir: PathBuf,
        #[source]
        source: Box<IndexBuildError>,
    },
    #[error("loading catalog {}", dir.display())]
    LoadCached {
        dir: PathBuf,
        #[source]
        source: Box<IndexCacheError>,
    },
    #[error("loading the catalog")]
    LoadTask(#[source] tokio::task::JoinError),
    #[error("listening on {address}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The listener's address, or the runtime.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("serving gRPC")]
    Serve(#[source] tonic::transport::Error),
}

/// `grpc.health.v1.Health` as `opm serve` answers it: SERVING, whatever the service name
/// (a catalog is loaded before the port opens, so there is no other state).
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysServing;

#[tonic::async_trait]
impl Health for AlwaysServing {
    type WatchStream = std::pin::Pin<
        Box<dyn tokio_stream::Stream<Item = Result<HealthCheckResponse, tonic::Status>> + Send>,
    >;

    async fn check(
        &self,
        _: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        Ok(tonic::Response::new(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }))
    }

    async fn watch(
        &self,
        _: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        let first = tokio_stream::once(Ok(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }));
        // The status never changes: send it once, then hold the stream open.
        Ok(tonic::Response::new(Box::pin(
            tokio_stream::StreamExt::chain(first, tokio_stream::pending()),
        )))
    }
}

/// Every service `olm catalog serve` offers, over one index.
pub fn router(index: Arc<Index>) -> Result<tonic::service::Routes, ServeError> {
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(generated::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(ServeError::Reflection)?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(generated::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(ServeError::Reflection)?;
    let mut routes = tonic::service::RoutesBuilder::default();
    routes
        .add_service(
            generated::registry_server::RegistryServer::new(server::RegistryService::new(
                Arc::clone(&index),
            ))
            .max_decoding_message_size(limits::MAX_REQUEST_BYTES)
            .max_encoding_message_size(limits::MAX_MESSAGE_BYTES),
        )
        .add_service(
            generated::experimental_registry_server::ExperimentalRegistryServer::new(
                server::ExperimentalService::new(index),
            )
            .max_decoding_message_size(limits::MAX_REQUEST_BYTES)
            .max_encoding_message_size(limits::MAX_MESSAGE_BYTES),
        )
        .add_service(HealthServer::new(AlwaysServing))
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);
    Ok(routes.routes())
}

/// Where the catalog server keeps its index between runs, as `opm serve` does.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CacheArgs {
    /// Keep the catalog's index in this directory: a later start on the same catalog
    /// files (and the same olm) reads it instead of parsing the catalog again.
    #[arg(long)]
    pub cache_dir: Option<std::path::PathBuf>,
    /// Make sure the cache in --cache-dir is current, then exit without serving (for an
    /// image build).
    #[arg(long, requires = "cache_dir")]
    pub cache_only: bool,
}

/// Loads the catalog at `dir`, through the index cache in `cache_dir` when given
/// (blocking: call it off the async threads).
pub fn load(dir: &Path, cache_dir: Option<&Path>) -> Result<Index, ServeError> {
    let started = Instant::now();
    let index = match cache_dir {
        Some(cache) => Index::load_cached(dir, cache).map_err(|source| ServeError::LoadCached {
            dir: dir.to_path_buf(),
            source: Box::new(source),
        }),
        None => Index::load(dir).map_err(|source| ServeError::Load {
            dir: dir.to_path_buf(),
            source: Box::new(source),
        }),
    }?;
    tracing::info!(
        packages = index.package_count(),
        bundles = index.bundle_count(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "catalog indexed"
    );
    Ok(index)
}

/// Loads the catalog at `dir`, then serves it on `addr` until `shutdown` completes.
pub async fn serve(
    dir: &Path,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let dir_owned = dir.to_path_buf();
    let index = tokio::task::spawn_blocking(move || load(&dir_owned, None))
        .await
        .map_err(ServeError::LoadTask)??;
    serve_index(index, dir, addr, shutdown).await
}

/// Serves a loaded catalog (from `dir`, for the log) on `addr` until `shutdown` completes.
pub async fn serve_index(
    index: Index,
    dir: &Path,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Listen {
            address: addr,
            source,
        })?;
    let local = listener.local_addr()?;
    let routes = router(Arc::new(index))?;
    tracing::info!(address = %local, configs = %dir.display(), "serving registry");
    // TCP_NODELAY, as grpc-go (opm) sets it: otherwise the last frame of an answer can
    // wait for the client's delayed ACK (40 ms). tonic sets it only on listeners it binds.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    // Deliberate limits (see `limits`): streams per connection, and dead clients dropped.
    tonic::transport::Server::builder()
        .max_concurrent_streams(limits::MAX_SERVER_STREAMS)
        .http2_keepalive_interval(Some(limits::SERVER_KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(limits::SERVER_KEEPALIVE_TIMEOUT))
        .add_routes(routes)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(ServeError::Serve)?;
    tracing::info!("shut down");
    Ok(())
}

/// Runs the `olm catalog serve` command: loads the catalog at `dir`, then serves it on
/// `addr` until SIGINT or SIGTERM.
///
/// The runtime is single-threaded: an RPC is a lookup in the index plus at most one read
/// of the spill file, so more threads would add stacks and malloc arenas (memory that
/// grows with the machine's core count, each arena keeping its own freed blocks) rather
/// than answers. The catalog is loaded before the runtime starts.
pub fn run(dir: &Path, addr: SocketAddr, cache: &CacheArgs) -> Result<(), ServeError> {
    crate::memory::return_freed_memory_promptly();
    let index = load(dir, cache.cache_dir.as_deref())?;
    if cache.cache_only {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve_index(
        index,
        dir,
        addr,
        crate::signal::shutdown_signal(),
    ))
}
