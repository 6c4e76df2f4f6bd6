//! The tonic services over an [`Index`]: `api.Registry` and `api.ExperimentalRegistry`.

use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tonic::{Request, Response, Status};

use super::generated as api;
use super::generated::experimental_registry_server::ExperimentalRegistry;
use super::generated::registry_server::Registry;
use super::index::{Index, QueryError};

type Stream<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send + 'static>>;

/// Upstream returns plain Go errors, which grpc-go reports as UNKNOWN.
fn status(e: QueryError) -> Status {
    Status::unknown(e.0)
}

fn stream_of<T: Send + 'static>(items: Vec<T>) -> Stream<T> {
    Box::pin(tokio_stream::iter(items.into_iter().map(Ok)))
}

#[derive(Clone)]
pub struct RegistryService {
    index: Arc<Index>,
}

impl RegistryService {
    pub fn new(index: Arc<Index>) -> Self {
        RegistryService { index }
    }
}

#[tonic::async_trait]
impl Registry for RegistryService {
    type ListPackagesStream = Stream<api::PackageName>;
    type GetChannelEntriesThatReplaceStream = Stream<api::ChannelEntry>;
    type GetChannelEntriesThatProvideStream = Stream<api::ChannelEntry>;
    type GetLatestChannelEntriesThatProvideStream = Stream<api::ChannelEntry>;
    type ListBundlesStream = Stream<api::Bundle>;

    async fn list_packages(
        &self,
        _: Request<api::ListPackageRequest>,
    ) -> Result<Response<Self::ListPackagesStream>, Status> {
        let names = self
            .index
            .list_packages()
            .into_iter()
            .map(|name| api::PackageName { name })
            .collect();
        Ok(Response::new(stream_of(names)))
    }

    async fn get_package(
        &self,
        r: Request<api::GetPackageRequest>,
    ) -> Result<Response<api::Package>, Status> {
        self.index
            .get_package(&r.get_ref().name)
            .map(Response::new)
            .map_err(status)
    }

    async fn get_bundle(
        &self,
        r: Request<api::GetBundleRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let r = r.get_ref();
        self.index
            .get_bundle(&r.pkg_name, &r.channel_name, &r.csv_name)
            .map(Response::new)
            .map_err(status)
    }

    async fn get_bundle_for_channel(
        &self,
        r: Request<api::GetBundleInChannelRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let r = r.get_ref();
        self.index
            .get_bundle_for_channel(&r.pkg_name, &r.channel_name)
            .map(Response::new)
            .map_err(status)
    }

    async fn get_channel_entries_that_replace(
        &self,
        r: Request<api::GetAllReplacementsRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatReplaceStream>, Status> {
        let entries = self
            .index
            .get_channel_entries_that_replace(&r.get_ref().csv_name)
            .map_err(status)?;
        Ok(Response::new(stream_of(entries)))
    }

    async fn get_bundle_that_replaces(
        &self,
        r: Request<api::GetReplacementRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let r = r.get_ref();
        self.index
            .get_bundle_that_replaces(&r.csv_name, &r.pkg_name, &r.channel_name)
            .map(Response::new)
            .map_err(status)
    }

    async fn get_channel_entries_that_provide(
        &self,
        r: Request<api::GetAllProvidersRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatProvideStream>, Status> {
        let r = r.get_ref();
        let entries = self
            .index
            .get_channel_entries_that_provide(&r.group, &r.version, &r.kind)
            .map_err(status)?;
        Ok(Response::new(stream_of(entries)))
    }

    async fn get_latest_channel_entries_that_provide(
        &self,
        r: Request<api::GetLatestProvidersRequest>,
    ) -> Result<Response<Self::GetLatestChannelEntriesThatProvideStream>, Status> {
        let r = r.get_ref();
        let entries = self
            .index
            .get_latest_channel_entries_that_provide(&r.group, &r.version, &r.kind)
            .map_err(status)?;
        Ok(Response::new(stream_of(entries)))
    }

    async fn get_default_bundle_that_provides(
        &self,
        r: Request<api::GetDefaultProviderRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let r = r.get_ref();
        self.index
            .get_default_bundle_that_provides(&r.group, &r.version, &r.kind)
            .map(Response::new)
            .map_err(status)
    }

    async fn list_bundles(
        &self,
        _: Request<api::ListBundlesRequest>,
    ) -> Result<Response<Self::ListBundlesStream>, Status> {
        // One bundle decoded at a time, as the client reads.
        let index = Arc::clone(&self.index);
        let stream = tokio_stream::iter(
            (0..index.entry_count()).map(move |i| index.list_bundle(i).map_err(status)),
        );
        Ok(Response::new(Box::pin(stream)))
    }
}

#[derive(Clone)]
pub struct ExperimentalService {
    index: Arc<Index>,
}

impl ExperimentalService {
    pub fn new(index: Arc<Index>) -> Self {
        ExperimentalService { index }
    }
}

/// Upstream's rule for schema and package names in custom-schema queries.
fn valid_key_component(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

const KEY_PATTERN: &str = "^[a-zA-Z0-9][a-zA-Z0-9._-]*$";

fn to_prost_value(v: Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(a) => Kind::ListValue(prost_types::ListValue {
            values: a.into_iter().map(to_prost_value).collect(),
        }),
        Value::Object(m) => Kind::StructValue(to_struct(m)),
    };
    prost_types::Value { kind: Some(kind) }
}

fn to_struct(m: serde_json::Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: m.into_iter().map(|(k, v)| (k, to_prost_value(v))).collect(),
    }
}

#[tonic::async_trait]
impl ExperimentalRegistry for ExperimentalService {
    type ExperimentalListPackageCustomSchemasStream = Stream<prost_types::Struct>;

    async fn experimental_list_package_custom_schemas(
        &self,
        r: Request<api::ExperimentalListPackageCustomSchemasRequest>,
    ) -> Result<Response<Self::ExperimentalListPackageCustomSchemasStream>, Status> {
        // Without the acknowledgement header upstream answers an empty stream.
        let acknowledged = r
            .metadata()
            .get("x-acknowledge-experimental")
            .is_some_and(|v| v.as_bytes() == b"true");
        if !acknowledged {
            return Ok(Response::new(stream_of(Vec::new())));
        }
        let r = r.get_ref();
        if r.schema.is_empty() {
            return Err(Status::invalid_argument("schema is required"));
        }
        for (what, value) in [("schema", &r.schema), ("packageName", &r.package_name)] {
            if !value.is_empty() && !valid_key_component(value) {
                return Err(Status::invalid_argument(format!(
                    "invalid custom schema query: invalid {what} {value:?}: must match {KEY_PATTERN}"
                )));
            }
        }
        let blobs = self
            .index
            .custom_schema_blobs(&r.schema, &r.package_name)
            .map_err(|e| Status::internal(e.0))?;
        let structs = blobs
            .into_iter()
            .filter_map(|b| {
                if let Value::Object(m) = b {
                    Some(to_struct(m))
                } else {
                    None
                }
            })
            .collect();
        Ok(Response::new(stream_of(structs)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_components_follow_upstream_pattern() {
        assert!(valid_key_component("olm.custom-1_x"));
        assert!(!valid_key_component(".hidden"));
        assert!(!valid_key_component("a/b"));
        assert!(!valid_key_component(""));
    }
}
