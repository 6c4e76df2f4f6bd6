//! A manifest's JSON as lists and gets serve it (without icons, as upstream), made once when
//! the manifest changes and split where its namespace goes: a list is then a concatenation
//! of bytes, with no clone of any manifest and no JSON value tree per request, whichever
//! namespace a global catalog's packages are shown in.

use super::manifest::PackageManifest;

/// Stands in for the namespace while serializing; a control character never appears in a
/// Kubernetes name, so its escaped form marks the one place to cut.
const PLACEHOLDER: &str = "\u{1}";
const PLACEHOLDER_JSON: &[u8] = br#""namespace":"\u0001""#;

pub struct ListedJson {
    /// Up to and including `"namespace":`.
    head: Box<[u8]>,
    /// From the `,` after the namespace to the end.
    tail: Box<[u8]>,
}

impl ListedJson {
    pub fn of(manifest: &PackageManifest) -> ListedJson {
        let mut shown = manifest.clone().without_icons();
        shown.metadata.namespace = PLACEHOLDER.to_string();
        let json = serde_json::to_vec(&shown).expect("a PackageManifest always serializes");
        // metadata comes before spec and status, and within it namespace follows the name
        // (a package name, which holds no control character): the first match is the one.
        let at = json
            .windows(PLACEHOLDER_JSON.len())
            .position(|w| w == PLACEHOLDER_JSON)
            .expect("the namespace placeholder is serialized");
        let cut = at + br#""namespace":"#.len();
        ListedJson {
            head: json[..cut].into(),
            tail: json[cut + br#""\u0001""#.len()..].into(),
        }
    }

    /// The same JSON with resourceVersion `rv`, from JSON of a manifest that had none: the
    /// field follows the namespace, as in the struct, so the result is what [`Self::of`]
    /// gives for the manifest with `rv`. Lets manifests be serialized before they are
    /// given their resourceVersions.
    pub fn with_resource_version(self, rv: &str) -> ListedJson {
        let mut tail = Vec::with_capacity(self.tail.len() + rv.len() + 22);
        tail.extend_from_slice(br#","resourceVersion":"#);
        serde_json::to_writer(&mut tail, rv).expect("writing to a Vec cannot fail");
        tail.extend_from_slice(&self.tail);
        ListedJson {
            head: self.head,
            tail: tail.into_boxed_slice(),
        }
    }

    /// Both halves, for hashing: the JSON but for the namespace.
    pub fn parts(&self) -> [&[u8]; 2] {
        [&self.head, &self.tail]
    }

    /// Appends the manifest's JSON as seen in `namespace`.
    pub fn write(&self, namespace: &str, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.head);
        serde_json::to_writer(&mut *out, namespace).expect("writing to a Vec cannot fail");
        out.extend_from_slice(&self.tail);
    }

    /// Bytes written for a namespace of `namespace_len` bytes (before escaping).
    pub fn len(&self, namespace_len: usize) -> usize {
        self.head.len() + self.tail.len() + namespace_len + 2
    }
}

/// The whole object of a served manifest (kept without its channels) from its JSON, as
/// `serde_json::to_value` of the manifest would give it: in the manifest's namespace and
/// with its resourceVersion (a DELETED event's is newer than the JSON's).
pub fn object(manifest: &PackageManifest, listed: &ListedJson) -> serde_json::Value {
    let mut json = Vec::with_capacity(listed.len(manifest.metadata.namespace.len()));
    listed.write(&manifest.metadata.namespace, &mut json);
    let mut object: serde_json::Value =
        serde_json::from_slice(&json).expect("a ListedJson is JSON");
    let rv = &manifest.metadata.resource_version;
    if let Some(metadata) = object["metadata"].as_object_mut() {
        if rv.is_empty() {
            metadata.remove("resourceVersion");
        } else {
            metadata.insert("resourceVersion".into(), rv.as_str().into());
        }
    }
    object
}

/// `PackageManifestList` of `items` (each with the namespace it is shown in).
pub fn list_json<'a>(
    items: impl ExactSizeIterator<Item = (&'a ListedJson, &'a str)> + Clone,
    resource_version: u64,
) -> Vec<u8> {
    let size: usize = items.clone().map(|(l, ns)| l.len(ns.len()) + 1).sum();
    let mut out = Vec::with_capacity(size + 160);
    out.extend_from_slice(br#"{"kind":"PackageManifestList","apiVersion":""#);
    out.extend_from_slice(super::manifest::API_VERSION.as_bytes());
    out.extend_from_slice(br#"","metadata":{"resourceVersion":""#);
    out.extend_from_slice(resource_version.to_string().as_bytes());
    out.extend_from_slice(br#""},"items":["#);
    for (i, (listed, namespace)) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        listed.write(namespace, &mut out);
    }
    out.extend_from_slice(b"]}");
    out
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::packageserver::manifest::{self, CatalogInfo};

    fn manifests() -> Vec<PackageManifest> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let content = crate::catalog::load::load_path(&root.join("catalog")).unwrap();
        let info = CatalogInfo {
            name: "ours".into(),
            namespace: "olm".into(),
            display_name: "Ours".into(),
            publisher: "us".into(),
            labels: [("team".to_string(), "a".to_string())].into(),
            creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
        };
        manifest::manifests(&content, &info).into_values().collect()
    }

    #[test]
    fn the_split_json_is_the_manifest_without_icons_in_any_namespace() {
        let all = manifests();
        assert!(all.len() >= 4);
        assert!(
            all.iter().all(|m| m
                .status
                .channels
                .iter()
                .all(|c| c.current_csv_desc.icon.is_empty())),
            "icons are served from the snapshot, never kept in a manifest"
        );
        for m in &all {
            let listed = ListedJson::of(m);
            for ns in ["olm", "team-a", "with\"quote"] {
                let mut ours = Vec::new();
                listed.write(ns, &mut ours);
                let expected = serde_json::to_vec(&m.in_namespace(ns).without_icons()).unwrap();
                assert_eq!(
                    String::from_utf8(ours.clone()).unwrap(),
                    String::from_utf8(expected).unwrap()
                );
                assert_eq!(
                    listed.len(ns.len()),
                    ours.len() - (ns == "with\"quote") as usize
                );
            }
        }
    }

    #[test]
    fn the_object_of_a_manifest_kept_without_channels_is_the_whole_manifest() {
        for mut m in manifests() {
            m.metadata.resource_version = "7".into();
            let listed = ListedJson::of(&m);
            let mut kept = m.in_namespace("team-a");
            kept.status.channels.clear();
            assert!(!m.status.channels.is_empty());
            let whole = serde_json::to_value(m.in_namespace("team-a")).unwrap();
            assert_eq!(object(&kept, &listed), whole);
            // A DELETED event shows its own, newer resourceVersion.
            kept.metadata.resource_version = "9".into();
            assert_eq!(object(&kept, &listed)["metadata"]["resourceVersion"], "9");
        }
    }

    #[test]
    fn a_resource_version_added_later_gives_the_same_json() {
        for mut m in manifests() {
            let unversioned = ListedJson::of(&m);
            m.metadata.resource_version = "42".into();
            let (mut later, mut now) = (Vec::new(), Vec::new());
            unversioned
                .with_resource_version("42")
                .write("ns", &mut later);
            ListedJson::of(&m).write("ns", &mut now);
            assert_eq!(
                String::from_utf8(later).unwrap(),
                String::from_utf8(now).unwrap()
            );
        }
    }

    #[test]
    fn a_list_is_the_items_in_a_package_manifest_list() {
        let all = manifests();
        let listed: Vec<ListedJson> = all.iter().map(ListedJson::of).collect();
        let items: Vec<(&ListedJson, &str)> = listed.iter().map(|l| (l, "team-a")).collect();
        let list: Value = serde_json::from_slice(&list_json(items.iter().copied(), 42)).unwrap();
        assert_eq!(list["kind"], "PackageManifestList");
        assert_eq!(list["apiVersion"], "packages.operators.coreos.com/v1");
        assert_eq!(list["metadata"]["resourceVersion"], "42");
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        let expected: Vec<&str> = all.iter().map(|m| m.metadata.name.as_str()).collect();
        assert_eq!(names, expected);
        assert!(
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i["metadata"]["namespace"] == "team-a")
        );
        let empty: Value = serde_json::from_slice(&list_json(std::iter::empty(), 1)).unwrap();
        assert_eq!(empty["items"], serde_json::json!([]));
    }
}
