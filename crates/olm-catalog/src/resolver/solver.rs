//! Choosing among candidates is a SAT problem. The resolver states it in its own small
//! vocabulary (choices, groups, ordered "at least one of" clauses) and a [`Solver`] answers
//! it. [`ResolvoSolver`] is the implementation; resolvo breaks its API in minor releases,
//! so nothing else in the crate names it.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt::Display;

use resolvo::{
    Candidates, Condition, ConditionId, ConditionalRequirement, Dependencies, DependencyProvider,
    Interner, KnownDependencies, NameId, Problem as ResolvoProblem, Requirement, SolvableId,
    SolverCache, StringId, UnsolvableOrCancelled, VersionSetId, VersionSetUnionId,
};

pub type ChoiceId = u32;
pub type GroupId = u32;

/// "At least one of these", most preferred first.
#[derive(Clone, Debug)]
pub struct Clause {
    /// How the requirement reads in an explanation.
    pub label: String,
    pub alternatives: Vec<ChoiceId>,
}

/// The choices of one group: at most one of them can be chosen.
#[derive(Clone, Debug, Default)]
pub struct Members {
    pub choices: Vec<ChoiceId>,
    /// Known but never choosable, with the reason (shown when nothing else fits).
    pub excluded: Vec<(ChoiceId, String)>,
}

/// A dependency problem, asked lazily so that a large catalog costs only what is reached.
pub trait Problem {
    fn group_of(&self, choice: ChoiceId) -> GroupId;
    fn members(&self, group: GroupId) -> Members;
    /// What choosing `choice` requires.
    fn requirements(&self, choice: ChoiceId) -> Vec<Clause>;
    fn describe_choice(&self, choice: ChoiceId) -> String;
    fn describe_group(&self, group: GroupId) -> String;
}

/// The solver found no assignment; `detail` is its own account of the conflict.
#[derive(Clone, Debug)]
pub struct Unsatisfiable {
    pub detail: String,
}

pub trait Solver {
    /// Chooses at most one member per group such that every mandatory clause and every
    /// requirement of a chosen choice holds, preferring earlier alternatives.
    fn solve(
        &self,
        problem: &dyn Problem,
        mandatory: Vec<Clause>,
    ) -> Result<Vec<ChoiceId>, Unsatisfiable>;
}

/// [`Solver`] backed by resolvo's CDCL solver.
#[derive(Clone, Copy, Debug, Default)]
pub struct ResolvoSolver;

impl Solver for ResolvoSolver {
    fn solve(
        &self,
        problem: &dyn Problem,
        mandatory: Vec<Clause>,
    ) -> Result<Vec<ChoiceId>, Unsatisfiable> {
        let provider = Provider {
            problem,
            state: RefCell::default(),
        };
        let requirements = mandatory.iter().map(|c| provider.requirement(c)).collect();
        let mut solver = resolvo::Solver::new(provider);
        match solver.solve(ResolvoProblem::new().requirements(requirements)) {
            Ok(solution) => {
                let mut chosen: Vec<ChoiceId> =
                    solution.into_iter().map(SolvableId::into_raw).collect();
                chosen.sort_unstable();
                Ok(chosen)
            }
            Err(UnsolvableOrCancelled::Unsolvable(conflict)) => Err(Unsatisfiable {
                detail: conflict.display_user_friendly(&solver).to_string(),
            }),
            Err(UnsolvableOrCancelled::Cancelled(_)) => Err(Unsatisfiable {
                detail: "resolution was cancelled".into(),
            }),
        }
    }
}

/// Names are our groups, plus one synthetic name per clause that has no alternative at all
/// (resolvo then reports "no candidates" under the clause's label).
struct Provider<'p> {
    problem: &'p dyn Problem,
    state: RefCell<State>,
}

#[derive(Default)]
struct State {
    /// Per version set: its name and its members in preference order.
    version_sets: Vec<VersionSet>,
    unions: Vec<Vec<VersionSetId>>,
    strings: Vec<String>,
    /// resolvo keeps per-name state in dense vectors, so names are numbered densely here:
    /// our groups as they are met, and one synthetic name per clause without alternatives.
    names: Vec<NameKind>,
    name_of_group: HashMap<GroupId, NameId>,
}

enum NameKind {
    Group(GroupId),
    /// A clause nothing can satisfy, by its label.
    Unsatisfiable(String),
}

struct VersionSet {
    name: NameId,
    label: String,
    members: Vec<SolvableId>,
}

impl Provider<'_> {
    fn requirement(&self, clause: &Clause) -> ConditionalRequirement {
        let mut state = self.state.borrow_mut();
        if clause.alternatives.is_empty() {
            let name = push_name(&mut state, NameKind::Unsatisfiable(clause.label.clone()));
            let id = push_version_set(
                &mut state,
                VersionSet {
                    name,
                    label: String::new(),
                    members: Vec::new(),
                },
            );
            return Requirement::Single(id).into();
        }
        // One version set per group, in the order each group first appears.
        let mut by_group: Vec<(GroupId, Vec<SolvableId>)> = Vec::new();
        for &choice in &clause.alternatives {
            let group = self.problem.group_of(choice);
            match by_group.iter_mut().find(|(g, _)| *g == group) {
                Some((_, members)) => members.push(SolvableId::from_raw(choice)),
                None => by_group.push((group, vec![SolvableId::from_raw(choice)])),
            }
        }
        let ids: Vec<VersionSetId> = by_group
            .into_iter()
            .map(|(group, members)| {
                let name = name_of_group(&mut state, group);
                push_version_set(
                    &mut state,
                    VersionSet {
                        name,
                        label: clause.label.clone(),
                        members,
                    },
                )
            })
            .collect();
        if ids.len() == 1 {
            return Requirement::Single(ids[0]).into();
        }
        let union = VersionSetUnionId(state.unions.len() as u32);
        state.unions.push(ids);
        Requirement::Union(union).into()
    }

    fn intern_string(&self, s: String) -> StringId {
        let mut state = self.state.borrow_mut();
        state.strings.push(s);
        StringId(state.strings.len() as u32 - 1)
    }
}

fn push_name(state: &mut State, kind: NameKind) -> NameId {
    state.names.push(kind);
    NameId::from_raw(state.names.len() as u32 - 1)
}

fn name_of_group(state: &mut State, group: GroupId) -> NameId {
    if let Some(name) = state.name_of_group.get(&group) {
        return *name;
    }
    let name = push_name(state, NameKind::Group(group));
    state.name_of_group.insert(group, name);
    name
}

fn push_version_set(state: &mut State, set: VersionSet) -> VersionSetId {
    state.version_sets.push(set);
    VersionSetId(state.version_sets.len() as u32 - 1)
}

impl Interner for Provider<'_> {
    type NameId = NameId;
    type SolvableId = SolvableId;

    fn display_solvable(&self, solvable: SolvableId) -> impl Display + '_ {
        self.problem.describe_choice(solvable.into_raw())
    }

    fn display_merged_solvables(&self, solvables: &[SolvableId]) -> impl Display + '_ {
        let mut names: Vec<String> = solvables
            .iter()
            .map(|s| self.problem.describe_choice(s.into_raw()))
            .collect();
        names.sort();
        names.dedup();
        names.join(" | ")
    }

    fn display_name(&self, name: NameId) -> impl Display + '_ {
        match &self.state.borrow().names[name.into_raw() as usize] {
            NameKind::Group(group) => self.problem.describe_group(*group),
            NameKind::Unsatisfiable(label) => label.clone(),
        }
    }

    fn display_version_set(&self, version_set: VersionSetId) -> impl Display + '_ {
        self.state.borrow().version_sets[version_set.0 as usize]
            .label
            .clone()
    }

    fn display_string(&self, string_id: StringId) -> impl Display + '_ {
        self.state.borrow().strings[string_id.0 as usize].clone()
    }

    fn version_set_name(&self, version_set: VersionSetId) -> NameId {
        self.state.borrow().version_sets[version_set.0 as usize].name
    }

    fn solvable_name(&self, solvable: SolvableId) -> NameId {
        let group = self.problem.group_of(solvable.into_raw());
        name_of_group(&mut self.state.borrow_mut(), group)
    }

    fn version_sets_in_union(
        &self,
        union: VersionSetUnionId,
    ) -> impl Iterator<Item = VersionSetId> {
        self.state.borrow().unions[union.0 as usize]
            .clone()
            .into_iter()
    }

    fn resolve_condition(&self, _condition: ConditionId) -> Condition {
        unreachable!("the resolver states no conditional requirements")
    }
}

impl DependencyProvider for Provider<'_> {
    /// Keeps the version set's own preference order: resolvo's `sort_candidates` cannot
    /// see which requirement it sorts for, and preference depends on the dependent.
    async fn filter_candidates(
        &self,
        candidates: &[SolvableId],
        version_set: VersionSetId,
        inverse: bool,
    ) -> Vec<SolvableId> {
        let state = self.state.borrow();
        let members = &state.version_sets[version_set.0 as usize].members;
        if inverse {
            let wanted: HashSet<SolvableId> = members.iter().copied().collect();
            candidates
                .iter()
                .copied()
                .filter(|c| !wanted.contains(c))
                .collect()
        } else {
            let offered: HashSet<SolvableId> = candidates.iter().copied().collect();
            members
                .iter()
                .copied()
                .filter(|m| offered.contains(m))
                .collect()
        }
    }

    async fn get_candidates(&self, name: NameId) -> Option<Candidates<SolvableId>> {
        let group = match self.state.borrow().names[name.into_raw() as usize] {
            NameKind::Group(group) => group,
            NameKind::Unsatisfiable(_) => return Some(Candidates::default()),
        };
        let Members { choices, excluded } = self.problem.members(group);
        let mut candidates: Vec<SolvableId> =
            choices.into_iter().map(SolvableId::from_raw).collect();
        candidates.extend(excluded.iter().map(|(c, _)| SolvableId::from_raw(*c)));
        let excluded = excluded
            .into_iter()
            .map(|(c, why)| (SolvableId::from_raw(c), self.intern_string(why)))
            .collect();
        Some(Candidates {
            candidates,
            excluded,
            ..Candidates::default()
        })
    }

    async fn sort_candidates(&self, _solver: &SolverCache<Self>, _solvables: &mut [SolvableId]) {}

    async fn get_dependencies(&self, solvable: SolvableId) -> Dependencies {
        let requirements = self
            .problem
            .requirements(solvable.into_raw())
            .iter()
            .map(|c| self.requirement(c))
            .collect();
        Dependencies::Known(KnownDependencies {
            requirements,
            constrains: Vec::new(),
        })
    }
}
