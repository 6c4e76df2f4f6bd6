//! The registry RPCs' answers, read from the index's tables (and, for manifests and
//! custom-schema blobs, from the spill file), with upstream's messages.

use prost::Message;
use serde_json::Value;

use super::{ChannelIdx, Index, PackageIdx, QueryError, Span, api, q};

fn err<T>(message: String) -> Result<T, QueryError> {
    Err(QueryError(message))
}

impl Index {
    /// The `api.Bundle` of one channel entry. `with_manifests` reads `csvJson` and `object`
    /// back from the spill file; `trimmed` blanks `replaces` and `skips`, as upstream's
    /// single-bundle RPCs do.
    fn bundle(
        &self,
        e: u32,
        with_manifests: bool,
        trimmed: bool,
    ) -> Result<api::Bundle, QueryError> {
        let (entry, _, channel, b) = self.entry_parts(e);
        let light = &self.light[b.light.range()];
        let mut bundle = if with_manifests && b.heavy.len > 0 {
            let mut bytes = Vec::with_capacity(light.len() + b.heavy.len as usize);
            bytes.extend_from_slice(light);
            self.store
                .read_into(b.heavy, &mut bytes)
                .map_err(|e| QueryError(format!("reading bundle {}: {e}", q(self.str(b.name)))))?;
            api::Bundle::decode(bytes.as_slice())
        } else {
            api::Bundle::decode(light)
        }
        .map_err(|e| QueryError(format!("decoding bundle {}: {e}", q(self.str(b.name)))))?;
        if let Some(csv) = b.csv_object.and_then(|i| bundle.object.get(i as usize)) {
            bundle.csv_json = csv.clone();
        }
        bundle.channel_name = self.str(channel.name).to_owned();
        bundle.skip_range = self.str(entry.skip_range).to_owned();
        if !trimmed {
            bundle.replaces = self.str(entry.replaces).to_owned();
            bundle.skips = self
                .skips(entry)
                .iter()
                .map(|&s| self.str(s).to_owned())
                .collect();
        }
        Ok(bundle)
    }

    fn channel_entry(&self, e: u32, replaces: Span) -> api::ChannelEntry {
        let (_, pkg, ch, b) = self.entry_parts(e);
        api::ChannelEntry {
            package_name: self.str(pkg.name).to_owned(),
            channel_name: self.str(ch.name).to_owned(),
            bundle_name: self.str(b.name).to_owned(),
            replaces: self.str(replaces).to_owned(),
        }
    }

    /// The channel entries upstream reports for a bundle that provides an API: one for its
    /// `replaces`, plus one per other skipped name (only names in the same channel unless
    /// `any_skip`). Interned spans compare equal exactly when their strings do.
    fn entries_for_bundle(&self, e: u32, any_skip: bool, out: &mut Vec<api::ChannelEntry>) {
        let (entry, _, ch, _) = self.entry_parts(e);
        out.push(self.channel_entry(e, entry.replaces));
        for &s in self.skips(entry) {
            if s != entry.replaces && (any_skip || self.entry_named(ch, self.str(s)).is_some()) {
                out.push(self.channel_entry(e, s));
            }
        }
    }

    pub fn list_packages(&self) -> Vec<String> {
        self.packages
            .iter()
            .map(|p| self.str(p.name).to_owned())
            .collect()
    }

    pub fn get_package(&self, name: &str) -> Result<api::Package, QueryError> {
        let Some(pkg) = self.package(name) else {
            return err(format!("package {} not found", q(name)));
        };
        let deprecation = |m: Option<Span>| {
            m.map(|m| api::Deprecation {
                message: self.str(m).to_owned(),
            })
        };
        Ok(api::Package {
            name: self.str(pkg.name).to_owned(),
            channels: self
                .channels_of(pkg)
                .iter()
                .map(|c| api::Channel {
                    name: self.str(c.name).to_owned(),
                    csv_name: self.bundle_name(c.head).to_owned(),
                    deprecation: deprecation(c.deprecation),
                })
                .collect(),
            default_channel_name: self.str(pkg.default_channel).to_owned(),
            deprecation: deprecation(pkg.deprecation),
        })
    }

    fn package_channel(
        &self,
        pkg_name: &str,
        channel_name: &str,
    ) -> Result<(&PackageIdx, &ChannelIdx), QueryError> {
        let Some(pkg) = self.package(pkg_name) else {
            return err(format!("package {} not found", q(pkg_name)));
        };
        let Some(ch) = self.channel(pkg, channel_name) else {
            return err(format!(
                "package {}, channel {} not found",
                q(pkg_name),
                q(channel_name)
            ));
        };
        Ok((pkg, ch))
    }

    pub fn get_bundle(
        &self,
        pkg_name: &str,
        channel_name: &str,
        csv_name: &str,
    ) -> Result<api::Bundle, QueryError> {
        let (_, ch) = self.package_channel(pkg_name, channel_name)?;
        let Some(e) = self.entry_named(ch, csv_name) else {
            return err(format!(
                "package {}, channel {}, bundle {} not found",
                q(pkg_name),
                q(channel_name),
                q(csv_name)
            ));
        };
        self.bundle(e, true, true)
    }

    pub fn get_bundle_for_channel(
        &self,
        pkg_name: &str,
        channel_name: &str,
    ) -> Result<api::Bundle, QueryError> {
        let (_, ch) = self.package_channel(pkg_name, channel_name)?;
        self.bundle(ch.head, true, true)
    }

    pub fn get_channel_entries_that_replace(
        &self,
        name: &str,
    ) -> Result<Vec<api::ChannelEntry>, QueryError> {
        let mut out = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            if self.str(e.replaces) == name {
                out.push(self.channel_entry(i as u32, e.replaces));
            }
            for &s in self.skips(e) {
                if self.str(s) == name && s != e.replaces {
                    out.push(self.channel_entry(i as u32, e.replaces));
                }
            }
        }
        if out.is_empty() {
            return err(format!("no channel entries found that replace {name}"));
        }
        Ok(out)
    }

    pub fn get_bundle_that_replaces(
        &self,
        name: &str,
        pkg_name: &str,
        channel_name: &str,
    ) -> Result<api::Bundle, QueryError> {
        let Some(pkg) = self.package(pkg_name) else {
            return err(format!("package {pkg_name} not found"));
        };
        let Some(ch) = self.channel(pkg, channel_name) else {
            return err(format!(
                "package {}, channel {} not found",
                q(pkg_name),
                q(channel_name)
            ));
        };
        let found = ch.entries.rows().find(|&i| {
            let e = &self.entries[i as usize];
            self.str(e.replaces) == name || self.skips(e).iter().any(|&s| self.str(s) == name)
        });
        match found {
            Some(e) => self.bundle(e, true, true),
            None => err(format!(
                "no entry found for package {}, channel {}",
                q(pkg_name),
                q(channel_name)
            )),
        }
    }

    fn not_provided(group: &str, version: &str, kind: &str) -> QueryError {
        QueryError(format!(
            "no channel entries found that provide group:{} version:{} kind:{}",
            q(group),
            q(version),
            q(kind)
        ))
    }

    pub fn get_channel_entries_that_provide(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Vec<api::ChannelEntry>, QueryError> {
        let mut out = Vec::new();
        for e in 0..self.entries.len() as u32 {
            if self.provides(e, (group, version, kind)) {
                self.entries_for_bundle(e, true, &mut out);
            }
        }
        if out.is_empty() {
            return Err(Self::not_provided(group, version, kind));
        }
        Ok(out)
    }

    pub fn get_latest_channel_entries_that_provide(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Vec<api::ChannelEntry>, QueryError> {
        let mut out = Vec::new();
        for ch in &self.channels {
            if self.provides(ch.head, (group, version, kind)) {
                self.entries_for_bundle(ch.head, false, &mut out);
            }
        }
        if out.is_empty() {
            return Err(Self::not_provided(group, version, kind));
        }
        Ok(out)
    }

    pub fn get_default_bundle_that_provides(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<api::Bundle, QueryError> {
        let mut any = false;
        // Packages are sorted, so the first default-channel head that provides the API is
        // the one with the lowest package name, as upstream picks.
        for pkg in &self.packages {
            for ch in self.channels_of(pkg) {
                if self.provides(ch.head, (group, version, kind)) {
                    any = true;
                    if ch.name == pkg.default_channel {
                        return self.bundle(ch.head, true, true);
                    }
                }
            }
        }
        if !any {
            return Err(Self::not_provided(group, version, kind));
        }
        err(format!(
            "no entry found that provides group:{} version:{} kind:{}",
            q(group),
            q(version),
            q(kind)
        ))
    }

    /// The `i`th `ListBundles` message (`0..entry_count()`): replaces and skips kept,
    /// manifests dropped when the bundle has an image (`bundlePath`), as upstream does.
    pub fn list_bundle(&self, i: usize) -> Result<api::Bundle, QueryError> {
        let with_manifests = !self.bundles[self.entries[i].bundle as usize].has_path;
        self.bundle(i as u32, with_manifests, false)
    }

    /// The blobs of a custom schema for a package ("" for blobs without one), as JSON.
    pub fn custom_schema_blobs(
        &self,
        schema: &str,
        package: &str,
    ) -> Result<Vec<Value>, QueryError> {
        let Some(locs) = self.custom.get(&(schema.to_string(), package.to_string())) else {
            return Ok(Vec::new());
        };
        locs.iter()
            .map(|&loc| {
                let bytes = self
                    .store
                    .get(loc)
                    .map_err(|e| QueryError(format!("read meta blobs: {e}")))?;
                serde_json::from_slice(&bytes)
                    .map_err(|e| QueryError(format!("parse meta JSON: {e}")))
            })
            .collect()
    }
}
