//! An append-only spill file for the large, rarely read parts of a catalog (decoded
//! manifests, custom-schema blobs): written once while the index is built, then read back
//! by offset. The file is unlinked as soon as it is created, so it disappears with the
//! process; its pages live in the kernel's page cache, not in our RSS.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where one blob lives in the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loc {
    pub offset: u64,
    pub len: u32,
}

pub struct StoreWriter {
    out: BufWriter<File>,
    offset: u64,
}

pub struct Store {
    file: File,
}

impl StoreWriter {
    pub fn new() -> std::io::Result<Self> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "olm-registry-{}-{}.spill",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(StoreWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            offset: 0,
        })
    }

    /// A store kept at `path` (an index cache's), replacing what is there.
    pub fn create(path: &std::path::Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(StoreWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            offset: 0,
        })
    }

    pub fn put(&mut self, bytes: &[u8]) -> std::io::Result<Loc> {
        if bytes.is_empty() {
            return Ok(Loc::default());
        }
        let len = u32::try_from(bytes.len())
            .map_err(|_| std::io::Error::other("blob larger than 4 GiB"))?;
        self.out.write_all(bytes)?;
        let loc = Loc {
            offset: self.offset,
            len,
        };
        self.offset += u64::from(len);
        Ok(loc)
    }

    pub fn finish(self) -> std::io::Result<Store> {
        let file = self
            .out
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        Ok(Store { file })
    }
}

impl Store {
    /// A store a [`StoreWriter::create`] wrote.
    pub fn open(path: &std::path::Path) -> std::io::Result<Self> {
        Ok(Store {
            file: File::open(path)?,
        })
    }

    /// Its size in bytes.
    pub fn len(&self) -> std::io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    pub fn get(&self, loc: Loc) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0; loc.len as usize];
        self.file.read_exact_at(&mut buf, loc.offset)?;
        Ok(buf)
    }

    /// Appends the blob at `loc` to `buf`.
    pub fn read_into(&self, loc: Loc, buf: &mut Vec<u8>) -> std::io::Result<()> {
        let start = buf.len();
        buf.resize(start + loc.len as usize, 0);
        self.file.read_exact_at(&mut buf[start..], loc.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_by_location() {
        let mut w = StoreWriter::new().unwrap();
        let a = w.put(b"hello").unwrap();
        let empty = w.put(b"").unwrap();
        let b = w.put(b"world!").unwrap();
        let store = w.finish().unwrap();
        assert_eq!(store.get(b).unwrap(), b"world!");
        assert_eq!(store.get(a).unwrap(), b"hello");
        assert!(store.get(empty).unwrap().is_empty());
        let mut buf = b"x".to_vec();
        store.read_into(a, &mut buf).unwrap();
        assert_eq!(buf, b"xhello");
    }
}
