//! The limits on `olm.constraint`: size and all/any/not nesting, just under and just over.

use serde_json::{Value, json};

use crate::catalog::model::fbc::Property;
use crate::resolver::constraints::{
    Dependency, MAX_CONSTRAINT_BYTES, MAX_CONSTRAINT_NESTING, dependencies,
};

fn read(value: Value) -> Dependency {
    let mut deps = dependencies(&[Property::new("olm.constraint", value)]);
    assert_eq!(deps.len(), 1);
    deps.remove(0)
}

fn invalid_problem(dep: Dependency) -> String {
    match dep {
        Dependency::Invalid { problem, .. } => problem.to_string(),
        other => panic!("expected an invalid constraint, got {other}"),
    }
}

/// `all` nested `depth` deep around one `package` constraint.
fn nested(depth: usize) -> Value {
    let mut v = json!({"package": {"packageName": "etcd", "versionRange": ">=0.9.0"}});
    for _ in 0..depth {
        v = json!({"all": {"constraints": [v]}});
    }
    v
}

#[test]
fn compounds_nested_to_the_limit_are_read_and_one_more_is_not() {
    assert!(matches!(
        read(nested(MAX_CONSTRAINT_NESTING)),
        Dependency::Matching { .. }
    ));
    let problem = invalid_problem(read(nested(MAX_CONSTRAINT_NESTING + 1)));
    assert!(
        problem.contains("nested more than 16 deep (the limit)"),
        "{problem}"
    );
}

#[test]
fn a_constraint_at_the_size_limit_is_read_and_one_byte_more_is_not() {
    let sized = |size: usize| {
        let base =
            json!({"failureMessage": "", "gvk": {"group": "g", "version": "v1", "kind": "K"}});
        let pad = size - serde_json::to_string(&base).unwrap().len();
        json!({"failureMessage": "m".repeat(pad), "gvk": {"group": "g", "version": "v1", "kind": "K"}})
    };
    assert_eq!(
        serde_json::to_string(&sized(MAX_CONSTRAINT_BYTES))
            .unwrap()
            .len(),
        MAX_CONSTRAINT_BYTES
    );
    assert!(matches!(
        read(sized(MAX_CONSTRAINT_BYTES)),
        Dependency::Gvk { .. }
    ));
    let problem = invalid_problem(read(sized(MAX_CONSTRAINT_BYTES + 1)));
    assert!(
        problem.contains("131073 bytes, larger than the limit of 131072 bytes (128 KiB)"),
        "{problem}"
    );
}
