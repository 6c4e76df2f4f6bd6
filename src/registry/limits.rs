//! Resource limits of the registry gRPC API, on both sides: what our server
//! (`olm catalog serve`, `olm-registry`) accepts and sends, and what our client (`olm run`,
//! the CLI) accepts from a registry server it does not control. Each is an order of
//! magnitude above the largest public catalogs (operatorhub.io: about 350 packages and
//! 7,000 bundles; the largest bundle a few MiB of CRDs), and low enough that a hostile
//! server cannot make `olm run` grow without bound. README "Limits" lists them.

use std::time::Duration;

/// The largest gRPC message either side decodes or encodes: one `api.Bundle` with its
/// manifests. gRPC's default is 4 MiB, which a bundle with many large CRDs can pass; a
/// larger message is refused from its 5-byte length prefix, before it is buffered.
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// The largest request our server decodes: requests carry a few names.
pub const MAX_REQUEST_BYTES: usize = 64 << 10;

/// `ListBundles` messages (one per channel entry) a client reads in one catalog load.
pub const MAX_LIST_ENTRIES: usize = 50_000;

/// Bytes of `ListBundles` messages (as encoded) a client reads in one catalog load.
pub const MAX_LIST_BYTES: usize = 256 << 20;

/// What one decoded channel entry costs beyond its encoded size (its strings and
/// properties as separate allocations, and the maps that index it), as measured.
pub const ENTRY_OVERHEAD_BYTES: usize = 2 << 10;

/// The estimated memory (encoded bytes plus [`ENTRY_OVERHEAD_BYTES`] per entry) of all the
/// catalog loads one process runs at once. A load that would pass it fails at once (and is
/// retried later) rather than waiting: many hostile servers cannot add up past it.
pub const MAX_LOADING_BYTES: usize = 384 << 20;

/// Calls in flight at once on one client's connection (whatever the callers ask for); the
/// rest wait their turn in the client.
pub const MAX_CLIENT_STREAMS: usize = 16;

/// HTTP/2 streams a client may open at once on one connection to our server.
pub const MAX_SERVER_STREAMS: u32 = 100;

/// The longest a whole catalog load (`ListBundles`, every `GetPackage` and `GetBundle`)
/// may take, unless the caller says otherwise (`olm run --catalog-load-timeout`).
pub const DEFAULT_LOAD_TIMEOUT: Duration = Duration::from_secs(300);

/// HTTP/2 keepalive of our server: a client that stops answering PINGs is dropped, so dead
/// connections do not hold streams open.
pub const SERVER_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);
pub const SERVER_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Human form of a byte count, for error messages and the README.
pub fn mib(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(mib(MAX_MESSAGE_BYTES), "32 MiB");
        assert_eq!(mib(MAX_REQUEST_BYTES), "64 KiB");
        assert_eq!(mib(1000), "1000 bytes");
    }
}
