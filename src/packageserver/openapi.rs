//! Discovery documents and the OpenAPI v2/v3 schema of PackageManifest, enough for
//! `kubectl api-resources`, `kubectl explain packagemanifest.status.channels` and clients
//! that validate against the schema.

use serde_json::{Map, Value, json};

use super::manifest::{API_VERSION, GROUP, KIND, VERSION};

const PREFIX: &str =
    "com.github.operator-framework.operator-lifecycle-manager.pkg.package-server.apis.operators.v1";
const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

pub fn group() -> Value {
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": [{"groupVersion": API_VERSION, "version": VERSION}],
        "preferredVersion": {"groupVersion": API_VERSION, "version": VERSION},
    })
}

pub fn group_list() -> Value {
    let mut g = group();
    g.as_object_mut().map(|m| {
        m.remove("kind");
        m.remove("apiVersion")
    });
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [g]})
}

pub fn resource_list() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": API_VERSION,
        "resources": [
            {"name": "packagemanifests", "singularName": "packagemanifest", "namespaced": true,
             "kind": KIND, "verbs": ["get", "list", "watch"]},
            {"name": "packagemanifests/icon", "singularName": "", "namespaced": true,
             "kind": KIND, "verbs": ["get"]},
        ],
    })
}

fn reference(prefix: &str, name: &str) -> Value {
    json!({"$ref": format!("{prefix}{name}")})
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn object(description: &str, properties: Value, required: &[&str]) -> Value {
    let mut o = json!({"type": "object", "description": description, "properties": properties});
    if !required.is_empty() {
        o["required"] = json!(required);
    }
    o
}

fn array(items: Value, description: &str) -> Value {
    json!({"type": "array", "description": description, "items": items})
}

/// The schemas, with `$ref`s starting with `prefix` (`#/definitions/` or `#/components/schemas/`).
pub fn schemas(prefix: &str) -> Map<String, Value> {
    let mut defs = Map::new();
    manifest_schemas(prefix, &mut defs);
    content_schemas(prefix, &mut defs);
    meta_schemas(&mut defs);
    defs
}

/// PackageManifest, its list, spec and status.
fn manifest_schemas(prefix: &str, defs: &mut Map<String, Value>) {
    let r = |n: &str| reference(prefix, &format!("{PREFIX}.{n}"));
    let gvk = |kind: &str| json!([{"group": GROUP, "version": VERSION, "kind": kind}]);
    let mut manifest = object(
        "PackageManifest holds information about a package, which is a reference to one (or more) channels under a single package.",
        json!({
            "apiVersion": string("APIVersion defines the versioned schema of this representation of an object."),
            "kind": string("Kind is a string value representing the REST resource this object represents."),
            "metadata": {"description": "Standard object's metadata.", "allOf": [reference(prefix, &format!("{META}.ObjectMeta"))], "default": {}},
            "spec": {"description": "PackageManifestSpec defines the desired state of PackageManifest", "allOf": [r("PackageManifestSpec")], "default": {}},
            "status": {"description": "PackageManifestStatus represents the current status of the PackageManifest", "allOf": [r("PackageManifestStatus")], "default": {}},
        }),
        &[],
    );
    manifest["x-kubernetes-group-version-kind"] = gvk(KIND);
    defs.insert(format!("{PREFIX}.PackageManifest"), manifest);
    let mut list = object(
        "PackageManifestList is a list of PackageManifest objects.",
        json!({
            "apiVersion": string("APIVersion defines the versioned schema of this representation of an object."),
            "kind": string("Kind is a string value representing the REST resource this object represents."),
            "metadata": {"allOf": [reference(prefix, &format!("{META}.ListMeta"))], "default": {}},
            "items": array(r("PackageManifest"), "Items is the list of PackageManifests."),
        }),
        &["items"],
    );
    list["x-kubernetes-group-version-kind"] = gvk("PackageManifestList");
    defs.insert(format!("{PREFIX}.PackageManifestList"), list);
    defs.insert(
        format!("{PREFIX}.PackageManifestSpec"),
        object(
            "PackageManifestSpec defines the desired state of PackageManifest",
            json!({}),
            &[],
        ),
    );
    defs.insert(format!("{PREFIX}.PackageManifestStatus"), object(
        "PackageManifestStatus represents the current status of the PackageManifest",
        json!({
            "catalogSource": string("CatalogSource is the name of the CatalogSource this package belongs to"),
            "catalogSourceDisplayName": string("The display name of the CatalogSource"),
            "catalogSourcePublisher": string("The publisher of the CatalogSource"),
            "catalogSourceNamespace": string("CatalogSourceNamespace is the namespace of the owning CatalogSource"),
            "provider": {"description": "Provider is the provider of the PackageManifest's default CSV", "allOf": [r("AppLink")], "default": {}},
            "packageName": string("PackageName is the name of the overall package, ala `etcd`."),
            "deprecation": {"description": "Deprecation is an optional field which contains information if the package is deprecated.", "allOf": [r("Deprecation")]},
            "channels": array(r("PackageChannel"), "Channels are the declared channels for the package, ala `stable` or `alpha`."),
            "defaultChannel": string("DefaultChannel is, if specified, the name of the default channel for the package. The default channel will be installed if no other channel is explicitly given. If the package has a single channel, then that channel is implicitly the default."),
        }),
        &["catalogSource", "catalogSourceDisplayName", "catalogSourcePublisher", "catalogSourceNamespace", "packageName", "channels", "defaultChannel"],
    ));
}

/// What a manifest's status holds: channels, entries, the head's CSV description and its parts.
fn content_schemas(prefix: &str, defs: &mut Map<String, Value>) {
    let r = |n: &str| reference(prefix, &format!("{PREFIX}.{n}"));
    let free = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    defs.insert(format!("{PREFIX}.PackageChannel"), object(
        "PackageChannel defines a single channel under a package, pointing to a version of that package.",
        json!({
            "name": string("Name is the name of the channel, e.g. `alpha` or `stable`"),
            "currentCSV": string("CurrentCSV defines a reference to the CSV holding the version of this package currently for the channel."),
            "currentCSVDesc": {"description": "CurrentCSVSpec holds the spec of the current CSV", "allOf": [r("CSVDescription")], "default": {}},
            "deprecation": {"description": "Deprecation is an optional field which contains information if the channel is deprecated.", "allOf": [r("Deprecation")]},
            "entries": array(r("ChannelEntry"), "Entries lists all CSVs in the channel, with their upgrade edges."),
        }),
        &["name", "currentCSV", "entries"],
    ));
    defs.insert(format!("{PREFIX}.ChannelEntry"), object(
        "ChannelEntry defines a member of a package channel.",
        json!({
            "name": string("Name is the name of the bundle for this entry."),
            "version": string("Version is the version of the bundle for this entry."),
            "deprecation": {"description": "Deprecation is an optional field which contains information if the channel entry is deprecated.", "allOf": [r("Deprecation")]},
        }),
        &["name"],
    ));
    defs.insert(format!("{PREFIX}.CSVDescription"), object(
        "CSVDescription defines a description of a CSV",
        json!({
            "displayName": string("DisplayName is the CSV's display name"),
            "icon": array(r("Icon"), "Icon is the CSV's base64 encoded icon"),
            "version": string("Version is the CSV's semantic version"),
            "provider": {"description": "Provider is the CSV's provider", "allOf": [r("AppLink")], "default": {}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "keywords": array(json!({"type": "string"}), ""),
            "links": array(r("AppLink"), ""),
            "maintainers": array(r("Maintainer"), ""),
            "maturity": {"type": "string"},
            "description": string("LongDescription is the CSV's description"),
            "installModes": array(free.clone(), "InstallModes specify supported installation types"),
            "customresourcedefinitions": free,
            "apiservicedefinitions": free,
            "nativeApis": array(free, ""),
            "minKubeVersion": string("Minimum Kubernetes version for operator installation"),
            "relatedImages": array(json!({"type": "string"}), "List of related images"),
        }),
        &[],
    ));
    defs.insert(
        format!("{PREFIX}.AppLink"),
        object(
            "AppLink defines a link to an application",
            json!({"name": {"type": "string"}, "url": {"type": "string"}}),
            &[],
        ),
    );
    defs.insert(
        format!("{PREFIX}.Maintainer"),
        object(
            "Maintainer defines a project maintainer",
            json!({"name": {"type": "string"}, "email": {"type": "string"}}),
            &[],
        ),
    );
    defs.insert(
        format!("{PREFIX}.Icon"),
        object(
            "Icon defines a base64 encoded icon and media type",
            json!({"base64data": {"type": "string"}, "mediatype": {"type": "string"}}),
            &[],
        ),
    );
    defs.insert(format!("{PREFIX}.Deprecation"), object("Deprecation conveys information regarding a deprecated resource.", json!({"message": string("Message is a human readable message describing the deprecation.")}), &["message"]));
}

/// The meta/v1 types the manifests refer to.
fn meta_schemas(defs: &mut Map<String, Value>) {
    defs.insert(format!("{META}.ObjectMeta"), object(
        "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        json!({
            "name": string("Name must be unique within a namespace."),
            "namespace": string("Namespace defines the space within which each name must be unique."),
            "labels": {"type": "object", "description": "Map of string keys and values that can be used to organize and categorize (scope and select) objects.", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "resourceVersion": string("An opaque value that represents the internal version of this object."),
            "creationTimestamp": {"type": "string", "format": "date-time", "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
            "uid": {"type": "string"},
        }),
        &[],
    ));
    defs.insert(
        format!("{META}.ListMeta"),
        object(
            "ListMeta describes metadata that synthetic resources must have.",
            json!({"resourceVersion": {"type": "string"}, "continue": {"type": "string"}}),
            &[],
        ),
    );
}

fn paths(prefix: &str, v3: bool) -> Value {
    let body = |name: &str| {
        let schema = reference(prefix, &format!("{PREFIX}.{name}"));
        if v3 {
            json!({"description": "OK", "content": {"application/json": {"schema": schema}}})
        } else {
            json!({"description": "OK", "schema": schema})
        }
    };
    let get = |id: &str, name: &str, action: &str| {
        json!({"get": {
            "operationId": id,
            "tags": ["packagesOperatorsCoreosComV1"],
            "responses": {"200": body(name), "401": {"description": "Unauthorized"}},
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": {"group": GROUP, "version": VERSION, "kind": KIND},
        }})
    };
    json!({
        "/apis/packages.operators.coreos.com/v1/packagemanifests": get("listPackageManifestForAllNamespaces", "PackageManifestList", "list"),
        "/apis/packages.operators.coreos.com/v1/namespaces/{namespace}/packagemanifests": get("listNamespacedPackageManifest", "PackageManifestList", "list"),
        "/apis/packages.operators.coreos.com/v1/namespaces/{namespace}/packagemanifests/{name}": get("readNamespacedPackageManifest", "PackageManifest", "get"),
    })
}

pub fn v2() -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": "olm packages", "version": "v1"},
        "paths": paths("#/definitions/", false),
        "definitions": schemas("#/definitions/"),
    })
}

pub fn v3_group_version() -> Value {
    json!({
        "openapi": "3.0.0",
        "info": {"title": "olm packages", "version": "v1"},
        "paths": paths("#/components/schemas/", true),
        "components": {"schemas": schemas("#/components/schemas/")},
    })
}

/// The v3 index: one group-version document, named by a hash of its content so that
/// clients cache it until it changes.
pub fn v3_index(hash: &str) -> Value {
    json!({"paths": {
        "apis/packages.operators.coreos.com/v1": {"serverRelativeURL": format!("/openapi/v3/apis/packages.operators.coreos.com/v1?hash={hash}")},
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_has_a_schema() {
        for (doc, prefix) in [
            (v2(), "#/definitions/"),
            (v3_group_version(), "#/components/schemas/"),
        ] {
            let text = doc.to_string();
            let defs = schemas(prefix);
            for part in text.split("\"$ref\":\"").skip(1) {
                let name = part.split('"').next().unwrap().trim_start_matches(prefix);
                assert!(defs.contains_key(name), "{name}");
            }
        }
    }
}
