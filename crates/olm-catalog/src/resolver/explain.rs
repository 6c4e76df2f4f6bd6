//! Turns "unsatisfiable" into something a user can act on: first the missing pieces (a
//! dependency nothing provides, reached from which Subscription through which bundles),
//! then the solver's own account of the conflict.

use std::collections::{BTreeSet, HashSet, VecDeque};

use super::candidates::OlmProblem;
use super::solver::{ChoiceId, Clause, Problem};

/// How much of the candidate graph the explanation walks looking for missing pieces.
const MAX_VISITED: usize = 20_000;

pub fn explain(problem: &OlmProblem<'_>, mandatory: &[Clause], solver_detail: &str) -> String {
    let mut missing: BTreeSet<String> = BTreeSet::new();
    let mut seen: HashSet<ChoiceId> = HashSet::new();
    let mut queue: VecDeque<(ChoiceId, String)> = VecDeque::new();
    for clause in mandatory {
        if clause.alternatives.is_empty() {
            missing.insert(format!("{}: nothing can satisfy it", clause.label));
        }
        for &alt in &clause.alternatives {
            if seen.insert(alt) {
                queue.push_back((alt, clause.label.clone()));
            }
        }
    }
    while let Some((choice, path)) = queue.pop_front() {
        if seen.len() > MAX_VISITED {
            break;
        }
        for clause in problem.requirements(choice) {
            if clause.alternatives.is_empty() {
                missing.insert(format!("{path} → {}", clause.label));
            }
            for &alt in &clause.alternatives {
                if seen.insert(alt) {
                    queue.push_back((alt, format!("{path} → {}", problem.describe_choice(alt))));
                }
            }
        }
    }
    let mut out = String::from("constraints not satisfiable");
    if missing.is_empty() {
        out.push_str(":\n");
    } else {
        out.push_str("; missing pieces:\n");
        for m in &missing {
            out.push_str(&format!("  - {m}\n"));
        }
        out.push_str("conflict:\n");
    }
    for line in solver_detail.lines().filter(|l| !l.trim().is_empty()) {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out.trim_end().to_string()
}
