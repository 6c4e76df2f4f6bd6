//! A bundle's properties as the index keeps them for CEL rules, below the index and the
//! constraints that read them.

use crate::catalog::model::fbc::{Property, reads_back_from_text};

/// A bundle's properties as CEL rules read them. Few bundles' dependencies have a rule, and
/// decoded properties are `serde_json::Value` trees (a map node of about 600 bytes for a
/// small `olm.gvk`): an index keeps them as JSON text, a tenth of that, decoded when a rule
/// is evaluated.
#[derive(Clone, Debug)]
pub enum BundleProperties {
    Text(Box<str>),
    /// Properties nested too deep to be read back from text.
    Decoded(Vec<Property>),
}

impl BundleProperties {
    pub fn packed<'a>(properties: impl Iterator<Item = &'a Property> + Clone) -> Self {
        if !properties.clone().all(|p| reads_back_from_text(&p.value)) {
            return BundleProperties::Decoded(properties.cloned().collect());
        }
        let all: Vec<&Property> = properties.collect();
        let text = serde_json::to_string(&all).expect("properties serialize into a string");
        BundleProperties::Text(text.into())
    }

    pub fn decode(&self) -> std::borrow::Cow<'_, [Property]> {
        match self {
            BundleProperties::Decoded(properties) => properties.into(),
            BundleProperties::Text(text) => serde_json::from_str::<Vec<Property>>(text)
                .expect("properties serialized here, none too deep, decode")
                .into(),
        }
    }
}
