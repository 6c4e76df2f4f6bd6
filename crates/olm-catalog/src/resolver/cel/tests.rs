//! The limits on CEL rules: just under each works, just over fails naming the limit; and
//! the inputs that overflowed the stack before the limits existed.

use serde_json::json;

use super::*;

fn props(n: usize) -> Vec<Property> {
    (0..n)
        .map(|i| Property::new("olm.label", json!({"label": format!("l{i}")})))
        .collect()
}

fn plus_chain(pluses: usize) -> String {
    format!("1{} > 0", " + 1".repeat(pluses))
}

#[test]
fn tokens_just_under_the_limit_compile_and_just_over_do_not() {
    // `true` then `|| true` pairs: 1 + 2k tokens, and `||` builds a balanced tree.
    let rule = |tokens: usize| format!("true{}", " || true".repeat((tokens - 1) / 2));
    let under = rule(MAX_CEL_TOKENS - 1);
    assert_eq!(lexical_shape(&under).0, MAX_CEL_TOKENS - 1);
    assert!(CelRule::compile(&under).unwrap().evaluate(&[]).unwrap());
    let over = rule(MAX_CEL_TOKENS + 1);
    let e = CelRule::compile(&over).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "{} tokens, more than the limit of {MAX_CEL_TOKENS}",
            MAX_CEL_TOKENS + 1
        )),
        "{e}"
    );
}

#[test]
fn nesting_just_under_the_limit_compiles_and_just_over_does_not() {
    let nested = |n: usize| format!("{}1{} == 1", "(".repeat(n), ")".repeat(n));
    assert!(
        CelRule::compile(&nested(MAX_CEL_NESTING))
            .unwrap()
            .evaluate(&[])
            .unwrap()
    );
    let e = CelRule::compile(&nested(MAX_CEL_NESTING + 1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nests brackets 9 deep, more than the limit of 8"),
        "{e}"
    );
    // Brackets inside string literals do not count.
    assert!(CelRule::compile(&format!("'{}' != ''", "(".repeat(100))).is_ok());
    assert!(CelRule::compile(&format!("'''{}''' != \"[\"", "(\"".repeat(100))).is_ok());
}

#[test]
fn depth_just_under_the_limit_evaluates_and_just_over_does_not_compile() {
    // `a + b > 0` over k additions is k + 2 levels deep.
    let under = plus_chain(MAX_CEL_DEPTH - 2);
    assert!(CelRule::compile(&under).unwrap().evaluate(&[]).unwrap());
    let e = CelRule::compile(&plus_chain(MAX_CEL_DEPTH - 1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("33 levels deep once parsed, more than the limit of 32"),
        "{e}"
    );
}

#[test]
fn cost_just_under_the_limit_evaluates_and_just_over_is_refused() {
    // Two comprehensions nested: nodes × (properties + 1)².
    let rule =
        CelRule::compile("properties.all(p, properties.exists(q, p.type == q.type))").unwrap();
    assert_eq!(rule.comprehension_depth, 2);
    let most = (0..10_000)
        .take_while(|n| rule.cost(&props(*n)) <= MAX_CEL_COST)
        .last()
        .unwrap();
    assert_eq!(
        rule.cost(&props(most)),
        rule.nodes * (most as u64 + 1).pow(2)
    );
    // A long list inside one property counts as much as that many properties.
    let long_list = vec![Property::new("olm.label", json!(vec![0; most + 1]))];
    assert!(
        rule.evaluate(&long_list)
            .unwrap_err()
            .to_string()
            .contains("more than the limit")
    );
    assert!(rule.evaluate(&props(most)).unwrap());
    let e = rule.evaluate(&props(most + 1)).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "over {} properties, more than the limit of {MAX_CEL_COST}",
            most + 1
        )),
        "{e}"
    );
    assert!(!rule.matches(&props(most + 1)));
}

/// Found by probing the `cel` crate with nested and chained rules: each of these overflowed the stack
/// of a test thread (2 MiB, as tokio's) in the `cel` crate's parser or evaluator, aborting
/// the process. Each is now refused by a limit, with a message naming it.
#[test]
fn rules_that_overflowed_the_stack_are_refused() {
    let cases = [
        (
            format!("{}1{}", "[".repeat(60), "]".repeat(60)),
            "nests brackets",
        ),
        (
            format!("{}1{}", "(".repeat(5000), ")".repeat(5000)),
            "tokens",
        ),
        (
            format!("{}1{}", "{1:".repeat(20), "}".repeat(20)),
            "nests brackets",
        ),
        (plus_chain(60), "levels deep"),
        (plus_chain(30_000), "tokens"),
        (format!("a{}", "[0]".repeat(100)), "levels deep"),
        (format!("a{}", "[0]".repeat(1000)), "tokens"),
        (
            format!("{}true", "properties.all(x, ".repeat(20)),
            "nests brackets",
        ),
    ];
    for (rule, limit) in cases {
        let e = CelRule::compile(&rule).unwrap_err().to_string();
        assert!(e.contains(limit) && e.contains("limit of"), "{e}");
        assert!(e.len() < 400, "the message abbreviates the rule: {e}");
    }
}
