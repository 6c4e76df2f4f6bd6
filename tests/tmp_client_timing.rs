use std::sync::Arc;
use std::time::{Duration, Instant};
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/testdata/community-operators/operators");
    let t = Instant::now();
    let mut cfg = olm::catalog::render::render_package_folders(&dir, &Default::default()).unwrap();
    cfg.bundles.retain(|b| b.package != "kuadrant-operator");
    cfg.channels.retain(|b| b.package != "kuadrant-operator");
    cfg.packages.retain(|b| b.name != "kuadrant-operator");
    eprintln!("render {:?} bundles {}", t.elapsed(), cfg.bundles.len());
    let index = olm::registry::Index::from_config(cfg.clone()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let routes = olm::registry::router(Arc::new(index)).unwrap();
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await;
    });
    let client =
        olm::registry::client::RegistryClient::new(&address, Duration::from_secs(5)).unwrap();
    for m in [
        olm::registry::client::Manifests::AsListed,
        olm::registry::client::Manifests::Fetch,
        olm::registry::client::Manifests::Fetch,
    ] {
        let t = Instant::now();
        let c = client
            .load_catalog_with(&olm::registry::client::LoadOptions {
                manifests: m,
                concurrency: 8,
            })
            .await
            .unwrap();
        eprintln!("{m:?} load {:?} bundles {}", t.elapsed(), c.bundles.len());
        let t = Instant::now();
        let d = olm::catalog::content_digest(&c);
        eprintln!("digest {:?} {}", t.elapsed(), &d[..12]);
    }
    let d = olm::catalog::content_digest(&cfg);
    eprintln!("files digest {}", &d[..12]);
}
