//! `Operator` (operators.coreos.com/v1, cluster-scoped): one installed package in one
//! namespace, named `<package>.<namespace>`, and the objects that make it up. Every
//! component carries the label `operators.coreos.com/<package>.<namespace>`; the status
//! lists them, so clients (kubectl-operator's `list-operands` and `uninstall`, consoles)
//! find what an install made without knowing how OLM made it.

use std::borrow::Cow;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceSubresourceStatus, CustomResourceSubresources,
    CustomResourceValidation,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use kube::core::{ClusterResourceScope, Resource};
use schemars::JsonSchema;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};

/// The prefix of the component label; the rest is the Operator's name.
pub const OPERATOR_LABEL_PREFIX: &str = "operators.coreos.com/";
/// Upstream truncates component label names to a label name's 63 characters.
const LABEL_NAME_MAX: usize = 63;

const GROUP: &str = "operators.coreos.com";
const VERSION: &str = "v1";
const KIND: &str = "Operator";
const PLURAL: &str = "operators";

// Written out rather than derived with `CustomResource`: upstream's `spec` is optional (a
// user may apply an Operator without one), and the derive makes it required in the schema
// and in deserialization alike. The schema's description is the CRD's.
#[derive(Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    title = "Operator",
    description = "An operator installed by OLM: one package in one namespace, named `<package>.<namespace>`. Its status lists the objects the install is made of, found by the label `operators.coreos.com/<package>.<namespace>`."
)]
pub struct Operator {
    // Validated by the API server itself, as every object's.
    #[schemars(skip)]
    pub metadata: ObjectMeta,
    // Read as empty when left out; no server-side default either.
    #[serde(default)]
    #[schemars(transform = without_default)]
    pub spec: OperatorSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OperatorStatus>,
}

/// Empty: OLM creates the Operator and everything about it is in the status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OperatorSpec {}

/// `spec` is optional without a server-side default, as upstream's schema has it.
fn without_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

impl Operator {
    /// An Operator named `name` without status.
    pub fn new(name: &str, spec: OperatorSpec) -> Self {
        Operator {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

impl Serialize for Operator {
    /// With `apiVersion` and `kind`, which server-side apply needs in the body.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = 4 + usize::from(self.status.is_some());
        let mut object = serializer.serialize_struct(KIND, fields)?;
        object.serialize_field("apiVersion", &Self::api_version(&()))?;
        object.serialize_field("kind", KIND)?;
        object.serialize_field("metadata", &self.metadata)?;
        object.serialize_field("spec", &self.spec)?;
        if let Some(status) = &self.status {
            object.serialize_field("status", status)?;
        }
        object.end()
    }
}

impl Resource for Operator {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        KIND.into()
    }

    fn group((): &()) -> Cow<'_, str> {
        GROUP.into()
    }

    fn version((): &()) -> Cow<'_, str> {
        VERSION.into()
    }

    fn plural((): &()) -> Cow<'_, str> {
        PLURAL.into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl kube::core::crd::v1::CustomResourceExt for Operator {
    /// The CRD as `#[derive(CustomResource)]` would make it, with the schema generated the
    /// same way (inline, structural), but `spec` optional.
    fn crd() -> CustomResourceDefinition {
        let generator = schemars::generate::SchemaSettings::openapi3()
            .with(|s| {
                s.inline_subschemas = true;
                s.meta_schema = None;
            })
            .with_transform(schemars::transform::AddNullable::default())
            .with_transform(kube::core::schema::StructuralSchemaRewriter)
            .with_transform(kube::core::schema::OptionalEnum)
            .with_transform(kube::core::schema::OptionalIntOrString)
            .into_generator();
        let schema = serde_json::to_value(generator.into_root_schema_for::<Self>())
            .and_then(serde_json::from_value)
            .expect("the Operator schema is valid JSONSchemaProps");
        CustomResourceDefinition {
            metadata: ObjectMeta {
                name: Some(Self::crd_name().to_string()),
                ..ObjectMeta::default()
            },
            spec: CustomResourceDefinitionSpec {
                group: GROUP.into(),
                names: CustomResourceDefinitionNames {
                    categories: Some(vec!["olm".into()]),
                    kind: KIND.into(),
                    plural: PLURAL.into(),
                    singular: Some("operator".into()),
                    ..CustomResourceDefinitionNames::default()
                },
                scope: "Cluster".into(),
                versions: vec![CustomResourceDefinitionVersion {
                    name: VERSION.into(),
                    schema: Some(CustomResourceValidation {
                        open_api_v3_schema: Some(schema),
                    }),
                    served: true,
                    storage: true,
                    subresources: Some(CustomResourceSubresources {
                        scale: None,
                        status: Some(CustomResourceSubresourceStatus(serde_json::json!({}))),
                    }),
                    ..CustomResourceDefinitionVersion::default()
                }],
                ..CustomResourceDefinitionSpec::default()
            },
            status: None,
        }
    }

    fn crd_name() -> &'static str {
        "operators.operators.coreos.com"
    }

    fn api_resource() -> kube::core::ApiResource {
        kube::core::ApiResource::erase::<Self>(&())
    }

    fn shortnames() -> &'static [&'static str] {
        &[]
    }
}

/// What the Operator is made of.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorStatus {
    /// The objects labelled as this Operator's components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Components>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Components {
    /// Selects the components: the Operator's label exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Each component, sorted by kind, apiVersion, namespace and name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<RichReference>,
}

/// A reference to a component with the conditions it reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RichReference {
    /// Kind of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Namespace of the component; unset for a cluster-scoped one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// API version of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The component's own conditions; for a CSV, its phase as a condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ComponentCondition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentCondition {
    /// Type of the condition.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason of the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the condition was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the condition's status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// The name of the Operator of `package` installed in `namespace`.
pub fn operator_name(package: &str, namespace: &str) -> String {
    format!("{package}.{namespace}")
}

/// The component label of the Operator `name` (its value is empty): upstream truncates the
/// name to 63 characters and drops trailing `.`, `_` and `-`.
pub fn operator_label(name: &str) -> String {
    // Package and namespace names are DNS labels: ASCII, so any byte is a char boundary.
    let name = name.get(..LABEL_NAME_MAX).unwrap_or(name);
    let name = name.trim_end_matches(['.', '_', '-']);
    format!("{OPERATOR_LABEL_PREFIX}{name}")
}

/// The Operators an object's labels make it a component of.
pub fn operator_names<'a>(
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<String> {
    labels
        .into_iter()
        .filter_map(|(key, _)| key.strip_prefix(OPERATOR_LABEL_PREFIX))
        .filter(|name| !name.is_empty() && !name.contains('/'))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn labels_name_the_operator_and_are_truncated_as_upstream() {
        assert_eq!(
            operator_label(&operator_name("etcd", "ops")),
            "operators.coreos.com/etcd.ops"
        );
        // 62 + ".ns": cut at 63 characters, the trailing dot dropped.
        let long = operator_name(&"a".repeat(62), "ns");
        assert_eq!(
            operator_label(&long),
            format!("operators.coreos.com/{}", "a".repeat(62))
        );
        let labels = BTreeMap::from([
            ("operators.coreos.com/etcd.ops".to_string(), String::new()),
            ("olm.managed".to_string(), "true".to_string()),
        ]);
        assert_eq!(operator_names(&labels), ["etcd.ops"]);
    }

    #[test]
    fn spec_is_optional_as_upstream_has_it() {
        use kube::CustomResourceExt;
        // Read without `spec` (as `kubectl apply` stores one written without it).
        let operator: Operator = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "Operator",
            "metadata": {"name": "etcd.ops"},
        }))
        .unwrap();
        assert_eq!(operator, Operator::new("etcd.ops", OperatorSpec::default()));
        // Written with apiVersion and kind.
        let written = serde_json::to_value(&operator).unwrap();
        assert_eq!(written["apiVersion"], "operators.coreos.com/v1");
        assert_eq!(written["kind"], "Operator");
        assert_eq!(written["spec"], serde_json::json!({}));
        assert!(written.get("status").is_none());
        // The schema neither requires `spec` nor defaults it in.
        let crd = Operator::crd();
        let version = &crd.spec.versions[0];
        let root = version.schema.as_ref().unwrap().open_api_v3_schema.as_ref();
        let root = root.unwrap();
        assert!(root.required.is_none(), "{:?}", root.required);
        let spec = &root.properties.as_ref().unwrap()["spec"];
        assert!(spec.default.is_none());
        assert_eq!(crd.spec.scope, "Cluster");
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        assert_eq!(
            Operator::url_path(&(), None),
            "/apis/operators.coreos.com/v1/operators"
        );
    }
}
