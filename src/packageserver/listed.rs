//! A manifest's JSON as lists and gets serve it (without icons, as upstream), made once when
//! the manifest changes and split where its namespace goes: a list is then a concatenation
//! of bytes, with no clone of any manifest and no JSON value tree per request, whichever
//! namespace a global catalog's packages are shown in.

use std::sync::Arc;

use super::manifest::{ChannelHeadTexts, PackageManifest};
use crate::snapshots::HeadText;

/// Stands in for the namespace while serializing; a control character never appears in a
/// Kubernetes name, so its escaped form marks the one place to cut.
const PLACEHOLDER: &str = "\u{1}";
const PLACEHOLDER_JSON: &[u8] = br#""namespace":"\u0001""#;

pub struct ListedJson {
    /// The manifest, for lists, gets and watch events.
    whole: SplitJson,
    /// Its metadata alone, for Tables and metadata lists (`kubectl get` asks for a Table).
    metadata: SplitJson,
}

/// JSON cut where the namespace goes.
struct SplitJson {
    /// Up to and including `"namespace":`.
    head: Box<[u8]>,
    /// From the `,` after the namespace to the end, but for the [`Shared`] pieces.
    tail: Box<[u8]>,
    /// Pieces of the tail that a snapshot's text holds (channel descriptions), by place.
    shared: Box<[Shared]>,
}

/// Bytes `range` of `text`, which go into a tail at `at` (in the tail without them).
struct Shared {
    at: usize,
    text: Arc<HeadText>,
    range: std::ops::Range<usize>,
}

impl Shared {
    /// The bytes, from the text decompressed.
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.text.bytes()[self.range.clone()])
    }
}

impl SplitJson {
    /// `json` of something serialized with [`PLACEHOLDER`] for its namespace, which comes
    /// before anything that could hold a control character (a name precedes it).
    fn of(json: &[u8]) -> SplitJson {
        let at = json
            .windows(PLACEHOLDER_JSON.len())
            .position(|w| w == PLACEHOLDER_JSON)
            .expect("the namespace placeholder is serialized");
        let cut = at + br#""namespace":"#.len();
        SplitJson {
            head: json[..cut].into(),
            tail: json[cut + br#""\u0001""#.len()..].into(),
            shared: Box::new([]),
        }
    }

    /// The same JSON with each of `pieces` (text, and where in it bytes the tail holds)
    /// taken out of the tail and read from the text instead, looked for in order, each
    /// after the last; a piece not found stays in the tail.
    fn sharing(
        self,
        pieces: impl IntoIterator<Item = (Arc<HeadText>, std::ops::Range<usize>)>,
    ) -> SplitJson {
        let mut tail = Vec::with_capacity(self.tail.len());
        let mut shared = Vec::new();
        let mut from = 0;
        for (text, range) in pieces {
            let len = range.len();
            let bytes = text.bytes();
            let Some(found) = memchr::memmem::find(&self.tail[from..], &bytes[range.clone()])
            else {
                continue;
            };
            tail.extend_from_slice(&self.tail[from..from + found]);
            shared.push(Shared {
                at: tail.len(),
                text,
                range,
            });
            from += found + len;
        }
        tail.extend_from_slice(&self.tail[from..]);
        SplitJson {
            head: self.head,
            tail: tail.into_boxed_slice(),
            shared: shared.into_boxed_slice(),
        }
    }

    /// The tail's bytes in order, shared pieces included.
    fn for_each_tail_part(&self, mut f: impl FnMut(&[u8])) {
        let mut from = 0;
        for piece in &self.shared {
            f(&self.tail[from..piece.at]);
            piece.with_bytes(&mut f);
            from = piece.at;
        }
        f(&self.tail[from..]);
    }

    /// resourceVersion follows the namespace in [`super::manifest::Metadata`].
    fn with_resource_version(self, rv: &str) -> SplitJson {
        let mut tail = Vec::with_capacity(self.tail.len() + rv.len() + 22);
        tail.extend_from_slice(br#","resourceVersion":"#);
        serde_json::to_writer(&mut tail, rv).expect("writing to a Vec cannot fail");
        let added = tail.len();
        tail.extend_from_slice(&self.tail);
        let mut shared = self.shared;
        for piece in &mut shared {
            piece.at += added;
        }
        SplitJson {
            head: self.head,
            tail: tail.into_boxed_slice(),
            shared,
        }
    }

    fn write(&self, namespace: &str, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.head);
        serde_json::to_writer(&mut *out, namespace).expect("writing to a Vec cannot fail");
        self.for_each_tail_part(|bytes| out.extend_from_slice(bytes));
    }

    /// Exactly the bytes [`Self::write`] writes for `namespace`.
    fn written_len(&self, namespace: &str) -> usize {
        let shared: usize = self.shared.iter().map(|p| p.range.len()).sum();
        self.head.len() + json_len(&namespace) + self.tail.len() + shared
    }
}

/// The length of `value`'s JSON as serde_json writes it, counted without writing it.
fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).expect("counting cannot fail");
    count.0
}

impl ListedJson {
    /// As [`Self::of`], with each channel's description read from the snapshot's text of
    /// its head (`heads`) rather than copied: the descriptions are most of a manifest, and
    /// the snapshot keeps them anyway. A head's text ends with its description and a `}`
    /// (`HeadCsv`); only bytes found equal in the manifest's JSON are shared, so a text
    /// that does not hold the description shown leaves it copied.
    pub fn sharing(manifest: &PackageManifest, heads: &ChannelHeadTexts) -> ListedJson {
        let listed = ListedJson::of(manifest);
        if heads.is_empty() {
            return listed;
        }
        let package = &manifest.status.package_name;
        let pieces: Vec<(Arc<HeadText>, std::ops::Range<usize>)> = manifest
            .status
            .channels
            .iter()
            .filter_map(|channel| {
                let text = heads.get(&(package.clone(), channel.current_csv.clone()))?;
                let end = text.len().checked_sub(1)?;
                let start = end.checked_sub(json_len(&channel.current_csv_desc))?;
                Some((Arc::clone(text), start..end))
            })
            .collect();
        ListedJson {
            whole: listed.whole.sharing(pieces),
            metadata: listed.metadata,
        }
    }

    pub fn of(manifest: &PackageManifest) -> ListedJson {
        let mut shown = manifest.clone().without_icons();
        shown.metadata.namespace = PLACEHOLDER.to_string();
        let whole = serde_json::to_vec(&shown).expect("a PackageManifest always serializes");
        let metadata =
            serde_json::to_vec(&shown.metadata).expect("a PackageManifest always serializes");
        ListedJson {
            whole: SplitJson::of(&whole),
            metadata: SplitJson::of(&metadata),
        }
    }

    /// The same JSON with resourceVersion `rv`, from JSON of a manifest that had none: the
    /// field follows the namespace, as in the struct, so the result is what [`Self::of`]
    /// gives for the manifest with `rv`. Lets manifests be serialized before they are
    /// given their resourceVersions.
    pub fn with_resource_version(self, rv: &str) -> ListedJson {
        ListedJson {
            whole: self.whole.with_resource_version(rv),
            metadata: self.metadata.with_resource_version(rv),
        }
    }

    /// The manifest's JSON but for the namespace, in parts, for hashing.
    pub fn for_each_part(&self, mut f: impl FnMut(&[u8])) {
        f(&self.whole.head);
        self.whole.for_each_tail_part(f);
    }

    /// Appends the manifest's JSON as seen in `namespace`.
    pub fn write(&self, namespace: &str, out: &mut Vec<u8>) {
        self.whole.write(namespace, out);
    }

    /// Exactly the bytes [`Self::write`] writes for `namespace`.
    pub fn written_len(&self, namespace: &str) -> usize {
        self.whole.written_len(namespace)
    }

    /// Appends the manifest's `metadata` as seen in `namespace`.
    pub fn write_metadata(&self, namespace: &str, out: &mut Vec<u8>) {
        self.metadata.write(namespace, out);
    }

    /// Exactly the bytes [`Self::write_metadata`] writes for `namespace`.
    pub fn metadata_written_len(&self, namespace: &str) -> usize {
        self.metadata.written_len(namespace)
    }
}

/// The whole object of a served manifest (kept without its channels) from its JSON, as
/// `serde_json::to_value` of the manifest would give it: in the manifest's namespace and
/// with its resourceVersion (a DELETED event's is newer than the JSON's).
pub fn object(manifest: &PackageManifest, listed: &ListedJson) -> serde_json::Value {
    let mut json = Vec::with_capacity(listed.written_len(&manifest.metadata.namespace));
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

/// A served manifest as one request sees it: shared, never copied, with the namespace it is
/// shown in (a global catalog's packages appear in the namespace asked for).
#[derive(Clone)]
pub struct Visible {
    /// Without channels, as the store keeps it; whole objects come from `listed`.
    pub manifest: Arc<PackageManifest>,
    pub listed: Arc<ListedJson>,
    /// Set when shown in another namespace than the manifest's own.
    shown_in: Option<Arc<str>>,
}

impl Visible {
    /// A manifest as a request in namespace `shown` sees it.
    pub fn new(
        manifest: Arc<PackageManifest>,
        listed: Arc<ListedJson>,
        shown: &Arc<str>,
    ) -> Visible {
        let shown_in = (manifest.metadata.namespace != **shown).then(|| Arc::clone(shown));
        Visible {
            manifest,
            listed,
            shown_in,
        }
    }

    /// A manifest as seen in its own namespace (a list across all namespaces).
    pub fn own(manifest: Arc<PackageManifest>, listed: Arc<ListedJson>) -> Visible {
        Visible {
            manifest,
            listed,
            shown_in: None,
        }
    }

    pub fn namespace(&self) -> &str {
        self.shown_in
            .as_deref()
            .unwrap_or(&self.manifest.metadata.namespace)
    }

    /// The manifest itself, copied into the shown namespace only when that differs.
    pub fn in_namespace(&self) -> Arc<PackageManifest> {
        match &self.shown_in {
            None => Arc::clone(&self.manifest),
            Some(ns) => Arc::new(self.manifest.in_namespace(ns)),
        }
    }
}

/// Bytes of one body chunk, about: under glibc's mmap threshold (128 KiB, see
/// `crate::memory`), so chunks come from the heap and are reused, where one buffer for a
/// whole list (12 MB for 1,350 packages) was mapped, faulted in page by page and unmapped
/// again on every request (a third of a large list's time).
const CHUNK_BYTES: usize = 64 * 1024;

/// A `PackageManifestList` of `items` (each with the namespace it is shown in) as a
/// response body: written a chunk at a time from the items' shared JSON as the client
/// reads, so a list holds no copy of itself; its exact length is known up front (the
/// Content-Length).
pub struct ListBody {
    items: std::vec::IntoIter<Visible>,
    head: Option<Vec<u8>>,
    remaining: u64,
    first: bool,
    ended: bool,
}

impl ListBody {
    pub fn new(items: Vec<Visible>, resource_version: u64) -> ListBody {
        let mut head = Vec::with_capacity(160);
        head.extend_from_slice(br#"{"kind":"PackageManifestList","apiVersion":""#);
        head.extend_from_slice(super::manifest::API_VERSION.as_bytes());
        head.extend_from_slice(br#"","metadata":{"resourceVersion":""#);
        head.extend_from_slice(resource_version.to_string().as_bytes());
        head.extend_from_slice(br#""},"items":["#);
        let commas = items.len().saturating_sub(1);
        let items_len: usize = items
            .iter()
            .map(|v| v.listed.written_len(v.namespace()))
            .sum();
        ListBody {
            remaining: (head.len() + items_len + commas + LIST_END.len()) as u64,
            items: items.into_iter(),
            head: Some(head),
            first: true,
            ended: false,
        }
    }

    /// The next chunk: whole items up to about [`CHUNK_BYTES`] (an item larger than that is
    /// a chunk of its own), the list's head first and its end last.
    fn next_chunk(&mut self) -> Option<Vec<u8>> {
        if self.ended {
            return None;
        }
        let mut chunk = self
            .head
            .take()
            .unwrap_or_else(|| Vec::with_capacity(CHUNK_BYTES));
        while chunk.len() < CHUNK_BYTES {
            let Some(visible) = self.items.next() else {
                chunk.extend_from_slice(LIST_END);
                self.ended = true;
                break;
            };
            if !std::mem::take(&mut self.first) {
                chunk.push(b',');
            }
            visible.listed.write(visible.namespace(), &mut chunk);
        }
        self.remaining -= chunk.len() as u64;
        Some(chunk)
    }
}

const LIST_END: &[u8] = b"]}";

impl http_body::Body for ListBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let chunk = self.get_mut().next_chunk();
        std::task::Poll::Ready(chunk.map(|c| Ok(http_body::Frame::data(c.into()))))
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::Value;

    use super::*;
    fn manifests() -> Vec<PackageManifest> {
        crate::packageserver::manifest::fixtures::our_manifests()
            .into_values()
            .collect()
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
                assert_eq!(listed.written_len(ns), ours.len());
            }
        }
    }

    #[test]
    fn descriptions_read_from_the_snapshot_give_the_same_json() {
        use crate::packageserver::manifest::{self, fixtures};
        let mut content = fixtures::our_catalog();
        let heads = manifest::keep_channel_heads(&mut content);
        let all = manifest::manifests(&content, &heads, &fixtures::info());
        let mut shared_pieces = 0;
        for m in all.values() {
            let (copied, shared) = (ListedJson::of(m), ListedJson::sharing(m, &heads));
            shared_pieces += shared.whole.shared.len();
            assert!(
                shared.whole.tail.len() < copied.whole.tail.len(),
                "{}",
                m.metadata.name
            );
            let (copied, shared) = (
                copied.with_resource_version("12"),
                shared.with_resource_version("12"),
            );
            for ns in ["olm", "with\"quote"] {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                copied.write(ns, &mut a);
                shared.write(ns, &mut b);
                assert_eq!(
                    String::from_utf8(b).unwrap(),
                    String::from_utf8(a.clone()).unwrap()
                );
                assert_eq!(shared.written_len(ns), a.len());
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            copied.for_each_part(|p| a.extend_from_slice(p));
            shared.for_each_part(|p| b.extend_from_slice(p));
            assert_eq!(a, b, "the same bytes are hashed");
        }
        // Every channel of every package: each description is shared, none copied.
        let channels: usize = all.values().map(|m| m.status.channels.len()).sum();
        assert_eq!(shared_pieces, channels);
        // A head whose text is not the description shown: kept as bytes of its own.
        let m = &all["reverse-words"];
        let mut other = heads;
        for text in other.values_mut() {
            *text = Arc::new(HeadText::new(
                r#"{"name":"x","labels":{},"desc":{"provider":{}}}"#,
            ));
        }
        let copied = ListedJson::sharing(m, &other);
        assert!(copied.whole.shared.is_empty());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        copied.write("olm", &mut a);
        ListedJson::of(m).write("olm", &mut b);
        assert_eq!(a, b);
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

    /// The whole body, chunk by chunk, checking the announced length as it goes.
    fn collect(mut body: ListBody) -> (Vec<u8>, usize) {
        use http_body::Body;
        let announced = body.size_hint().exact().unwrap();
        let (mut out, mut chunks) = (Vec::new(), 0);
        while let Some(chunk) = body.next_chunk() {
            assert!(!chunk.is_empty());
            out.extend_from_slice(&chunk);
            chunks += 1;
            assert_eq!(
                body.size_hint().exact().unwrap(),
                announced - out.len() as u64
            );
        }
        assert!(body.is_end_stream());
        assert_eq!(out.len() as u64, announced, "Content-Length is exact");
        (out, chunks)
    }

    fn visible(all: &[PackageManifest], shown: &str) -> Vec<Visible> {
        let shown: Arc<str> = Arc::from(shown);
        all.iter()
            .map(|m| Visible::new(Arc::new(m.clone()), Arc::new(ListedJson::of(m)), &shown))
            .collect()
    }

    #[test]
    fn a_list_body_is_the_items_in_a_package_manifest_list() {
        let all = manifests();
        for ns in ["team-a", "olm", "with\"quote\u{1}\n"] {
            let (json, _) = collect(ListBody::new(visible(&all, ns), 42));
            let list: Value = serde_json::from_slice(&json).unwrap();
            let items: Vec<Value> = all
                .iter()
                .map(|m| serde_json::to_value(m.in_namespace(ns).without_icons()).unwrap())
                .collect();
            assert_eq!(
                list,
                serde_json::json!({
                    "kind": "PackageManifestList",
                    "apiVersion": "packages.operators.coreos.com/v1",
                    "metadata": {"resourceVersion": "42"},
                    "items": items,
                })
            );
        }
        let (empty, chunks) = collect(ListBody::new(Vec::new(), 1));
        let empty: Value = serde_json::from_slice(&empty).unwrap();
        assert_eq!(empty["items"], serde_json::json!([]));
        assert_eq!(chunks, 1);
    }

    #[test]
    fn a_large_list_goes_out_in_chunks_of_whole_items() {
        let one_of_each = visible(&manifests(), "team-a");
        let largest = one_of_each
            .iter()
            .map(|v| v.listed.written_len("team-a"))
            .max()
            .unwrap();
        let many: Vec<Visible> = (0..200).flat_map(|_| one_of_each.iter().cloned()).collect();
        let mut body = ListBody::new(many, 7);
        let mut whole = Vec::new();
        let mut sizes = Vec::new();
        while let Some(chunk) = body.next_chunk() {
            sizes.push(chunk.len());
            whole.extend_from_slice(&chunk);
        }
        assert!(sizes.len() > 3, "{sizes:?}");
        // Each chunk stops at the first item that takes it past CHUNK_BYTES.
        assert!(
            sizes.iter().all(|&s| s < CHUNK_BYTES + largest + 2),
            "{sizes:?}"
        );
        let list: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(
            list["items"].as_array().unwrap().len(),
            200 * one_of_each.len()
        );
    }
}
