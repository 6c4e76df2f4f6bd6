//! A stand-in for upstream's `mock-extension-apiserver` (the image upstream's e2e specs run
//! for CSVs that own APIServices; its module is not on the Go module proxy here). Same
//! command line: `--mock-group-version G/V --mock-kinds K1,K2 --secure-port P` (and `-v`,
//! `--debug`, `--cert-dir`, `--kubeconfig`, which change nothing here). Same answers: the
//! discovery of one group version whose resources are the kinds (plural, namespaced, no
//! verbs), served over HTTPS with `apiserver.crt` / `apiserver.key` from the certificate
//! directory OLM mounts. Like upstream's, it checks no client: a test API.

use std::path::PathBuf;

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ArgsError {
    #[error("unknown flag {0}")]
    Unknown(String),
    #[error("flag --{0} needs a value")]
    Missing(String),
    #[error("--secure-port {0:?} is no port number")]
    Port(String),
    #[error("--mock-group-version {0:?} is not GROUP/VERSION")]
    GroupVersion(String),
    #[error("--mock-kinds is empty")]
    NoKinds,
}

#[derive(Debug, PartialEq)]
pub struct Args {
    pub group: String,
    pub version: String,
    pub kinds: Vec<String>,
    pub port: u16,
    pub cert_dir: PathBuf,
}

/// Parses upstream's flags (`--name=value`, `--name value`, `-name=value`).
pub fn parse(args: &[String]) -> Result<Args, ArgsError> {
    let (mut gv, mut kinds, mut port) = (None, None, "443".to_string());
    let mut cert_dir = "/apiserver.local.config/certificates".to_string();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let flag = arg.trim_start_matches('-');
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (flag, None),
        };
        if matches!(name, "debug" | "v") {
            continue;
        }
        let known = [
            "mock-group-version",
            "mock-kinds",
            "secure-port",
            "cert-dir",
            "kubeconfig",
        ];
        if !known.contains(&name) {
            return Err(ArgsError::Unknown(arg.clone()));
        }
        let value = match inline {
            Some(value) => value,
            None => rest
                .next()
                .cloned()
                .ok_or_else(|| ArgsError::Missing(name.into()))?,
        };
        match name {
            "mock-group-version" => gv = Some(value),
            "mock-kinds" => kinds = Some(value),
            "secure-port" => port = value,
            "cert-dir" => cert_dir = value,
            "kubeconfig" => {}
            _ => return Err(ArgsError::Unknown(arg.clone())),
        }
    }
    let gv = gv.unwrap_or_default();
    let (group, version) = gv
        .split_once('/')
        .filter(|(g, v)| !g.is_empty() && !v.is_empty())
        .ok_or_else(|| ArgsError::GroupVersion(gv.clone()))?;
    let kinds: Vec<String> = kinds
        .unwrap_or_default()
        .split(',')
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .collect();
    if kinds.is_empty() {
        return Err(ArgsError::NoKinds);
    }
    Ok(Args {
        group: group.into(),
        version: version.into(),
        kinds,
        port: port.parse().map_err(|_| ArgsError::Port(port))?,
        cert_dir: cert_dir.into(),
    })
}

/// English plural of a kind, lower case, as Kubernetes names resources.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    let consonant_y = lower.ends_with('y')
        && !matches!(
            lower.chars().rev().nth(1),
            Some('a' | 'e' | 'i' | 'o' | 'u')
        );
    if consonant_y {
        format!("{}ies", &lower[..lower.len() - 1])
    } else if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// `/apis/<group>/<version>`: the kinds as resources.
pub fn resources(args: &Args) -> Value {
    let resources: Vec<Value> = args
        .kinds
        .iter()
        .map(|kind| {
            json!({
                "name": plural(kind), "singularName": kind.to_lowercase(),
                "namespaced": true, "kind": kind, "verbs": [],
            })
        })
        .collect();
    json!({
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": format!("{}/{}", args.group, args.version),
        "resources": resources,
    })
}

/// `/apis/<group>`: the one version.
pub fn group(args: &Args) -> Value {
    let version = json!({
        "groupVersion": format!("{}/{}", args.group, args.version),
        "version": args.version,
    });
    json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": args.group,
        "versions": [version], "preferredVersion": version,
    })
}

pub fn router(args: &Args) -> Router {
    let (group, resources) = (group(args), resources(args));
    let groups = json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]});
    Router::new()
        .route("/apis", get(move || async move { Json(groups) }))
        .route(
            &format!("/apis/{}", args.group),
            get(move || async move { Json(group) }),
        )
        .route(
            &format!("/apis/{}/{}", args.group, args.version),
            get(move || async move { Json(resources) }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn upstreams_command_line_parses() {
        let args = parse(&strings(&[
            "-v=4",
            "--mock-kinds",
            "fedora,fez",
            "--mock-group-version",
            "hats.abc.redhat.com/v1alpha1",
            "--secure-port",
            "5443",
            "--debug",
        ]))
        .unwrap();
        assert_eq!(args.group, "hats.abc.redhat.com");
        assert_eq!(args.kinds, ["fedora", "fez"]);
        assert_eq!(args.port, 5443);
        let list = resources(&args);
        assert_eq!(list["groupVersion"], "hats.abc.redhat.com/v1alpha1");
        assert_eq!(list["resources"][1]["name"], "fezes");
        assert_eq!(group(&args)["preferredVersion"]["version"], "v1alpha1");
    }

    #[test]
    fn bad_command_lines_name_the_flag() {
        let kinds = ["--mock-kinds=a", "--mock-group-version=g/v"];
        assert_eq!(
            parse(&strings(&[kinds[0], kinds[1], "--bogus=1"])),
            Err(ArgsError::Unknown("--bogus=1".into()))
        );
        assert_eq!(
            parse(&strings(&[kinds[0], kinds[1], "--bogus"])),
            Err(ArgsError::Unknown("--bogus".into()))
        );
        assert_eq!(
            parse(&strings(&[kinds[0], "--mock-group-version=g"])),
            Err(ArgsError::GroupVersion("g".into()))
        );
        assert_eq!(parse(&strings(&[kinds[1]])), Err(ArgsError::NoKinds));
        assert_eq!(
            parse(&strings(&[kinds[0], kinds[1], "--secure-port"])),
            Err(ArgsError::Missing("secure-port".into()))
        );
    }

    #[test]
    fn plurals_follow_english() {
        assert_eq!(plural("Policy"), "policies");
        assert_eq!(plural("Key"), "keys");
        assert_eq!(plural("Box"), "boxes");
        assert_eq!(plural("Fedora"), "fedoras");
    }
}
