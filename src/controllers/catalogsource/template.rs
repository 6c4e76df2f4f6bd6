//! `olm.catalogImageTemplate`: a CatalogSource annotation whose `{kube_major_version}`,
//! `{kube_minor_version}` and `{kube_patch_version}` are filled from the API server's
//! version to give `spec.image`, so one catalog object follows cluster upgrades (upstream's
//! catalog template controller). Only these three variables exist upstream; any other text
//! is left as written, and a result that is no image reference is reported, not used.

use std::str::FromStr;

/// The annotation holding the template.
pub const ANNOTATION: &str = "olm.catalogImageTemplate";
/// True once the template resolved into a valid reference (upstream's condition types).
pub const CONDITION_TEMPLATES_RESOLVED: &str = "TemplatesHaveResolved";
/// Its message is the image the template gives (or the text it got to).
pub const CONDITION_RESOLVED_IMAGE: &str = "ResolvedImage";

const VARIABLES: [&str; 3] = [
    "{kube_major_version}",
    "{kube_minor_version}",
    "{kube_patch_version}",
];

/// What a template gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The image `spec.image` must hold.
    Image(String),
    /// Why no image: the text the template got to, and upstream's message.
    Unresolved { processed: String, message: String },
}

/// Fills the variables of `template` from `version` and checks the result is an image
/// reference.
pub fn resolve(template: &str, version: Option<(u64, u64, u64)>) -> Resolution {
    let mut processed = template.to_string();
    let mut unresolved = Vec::new();
    for (i, variable) in VARIABLES.iter().enumerate() {
        if !processed.contains(variable) {
            continue;
        }
        // Upstream writes "missing" for a version it could not read.
        let value = version.map_or_else(
            || {
                unresolved.push(*variable);
                "missing".to_string()
            },
            |(major, minor, patch)| [major, minor, patch][i].to_string(),
        );
        processed = processed.replace(variable, &value);
    }
    // Braces are never part of a reference; the parser is the judge of the rest.
    let invalid_syntax =
        processed.contains(['{', '}']) || oci_client::Reference::from_str(&processed).is_err();
    if unresolved.is_empty() && !invalid_syntax {
        return Resolution::Image(processed);
    }
    let quoted = unresolved
        .iter()
        .map(|v| format!("\"{v}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let message = match (invalid_syntax, unresolved.is_empty()) {
        (true, false) => format!(
            "cannot construct catalog image reference, because variable(s) {quoted} could not be resolved and one or more template(s) has improper syntax"
        ),
        (true, true) => "cannot construct catalog image reference, because one or more template(s) has improper syntax".to_string(),
        (false, _) => format!(
            "cannot construct catalog image reference, because variable(s) {quoted} could not be resolved"
        ),
    };
    Resolution::Unresolved { processed, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Option<(u64, u64, u64)> = Some((1, 37, 1));

    #[test]
    fn the_three_variables_come_from_the_server_version() {
        assert_eq!(
            resolve(
                "quay.io/olmtest/catsrc-update-test:{kube_major_version}.{kube_minor_version}.{kube_patch_version}",
                V
            ),
            Resolution::Image("quay.io/olmtest/catsrc-update-test:1.37.1".into())
        );
        // No variable: the annotation is the image itself.
        assert_eq!(
            resolve("quay.io/org/catalog:latest", V),
            Resolution::Image("quay.io/org/catalog:latest".into())
        );
    }

    #[test]
    fn what_cannot_resolve_says_why_in_upstreams_words() {
        let Resolution::Unresolved { processed, message } =
            resolve("quay.io/org/catalog:v{kube_minor_version}", None)
        else {
            panic!("no version, no image")
        };
        assert_eq!(processed, "quay.io/org/catalog:vmissing");
        assert_eq!(
            message,
            "cannot construct catalog image reference, because variable(s) \"{kube_minor_version}\" could not be resolved"
        );
        let Resolution::Unresolved { message, .. } =
            resolve("quay.io/org/catalog:{openshift_version}", V)
        else {
            panic!("an unknown variable is no reference")
        };
        assert_eq!(
            message,
            "cannot construct catalog image reference, because one or more template(s) has improper syntax"
        );
        let Resolution::Unresolved { message, .. } =
            resolve("quay.io/org/catalog:{kube_major_version}{bad}", None)
        else {
            panic!()
        };
        assert!(
            message.contains("\"{kube_major_version}\" could not be resolved and one or more"),
            "{message}"
        );
    }
}
