//! The CSV phase machine, pure: from the current status and what a round observed to the
//! next phase, reason and message (one transition per round, as upstream), whether to apply
//! the install strategy, and when to look again. Then [`next_status`] turns that into the
//! status to write, moving the timestamps and the capped phase history only on a real
//! transition, so a steady CSV compares equal to its desired status and is never written
//! (upstream's hot loop, PR #1974, came from timestamps that moved on every sync).

use super::install_error::InstallError;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::{
    ClusterServiceVersionStatus, CsvCondition, CsvPhase, CsvReason, RequirementStatus,
};

/// Upstream keeps the last 20 phase changes in `status.conditions`.
pub const HISTORY_LIMIT: usize = 20;
/// A CSV that failed to apply its strategy tries again after this long.
pub const REINSTALL_AFTER: Duration = Duration::from_secs(60);
/// How often a CSV with unmet requirements looks again when nothing wakes it.
pub const UNMET_RECHECK: Duration = Duration::from_secs(10);
/// How often an installing CSV whose Deployments are not ready looks again when nothing
/// wakes it: a pod's image pull failing or its container crashing changes no Deployment
/// (nothing wakes the CSV), yet its message should say so well before the install times out.
pub const HEALTH_RECHECK: Duration = Duration::from_secs(15);

/// Whether the stored status shows that no strategy of this CSV was ever applied before the
/// first install: nothing in its history went past `InstallReady`, the history is not capped
/// (older entries would be unknown), and no serving certificate was recorded. Then nothing
/// carrying its owner labels can be left over from an earlier strategy, and an install need
/// not list what it made before (five label-selected lists, each a scan of every object of
/// its kind on the API server). A CSV deleted and made again under the same name starts a
/// new history, but its predecessor's objects went with it: owner references for namespaced
/// ones, the finalizer's cleanup for the rest.
pub fn never_installed(status: Option<&ClusterServiceVersionStatus>) -> bool {
    let Some(status) = status else {
        return true;
    };
    let before_install = |phase: Option<CsvPhase>| {
        matches!(
            phase,
            None | Some(CsvPhase::None | CsvPhase::Pending | CsvPhase::InstallReady)
        )
    };
    status.conditions.len() < HISTORY_LIMIT
        && status.certs_last_updated.is_none()
        && before_install(status.phase)
        && status.conditions.iter().all(|c| before_install(c.phase))
}

/// The CSV's OperatorGroup as the install-mode rules see it.
#[derive(Clone, Debug, PartialEq)]
pub enum GroupState {
    Member {
        group: String,
        targets: Vec<String>,
    },
    NoGroup,
    TooMany(usize),
    /// The group has no status yet (just created): wait, change nothing.
    Waiting,
    NoTargets,
    Unsupported(String),
    /// Another group meeting this one's targets provides one of the CSV's APIs (why).
    OwnerConflict(String),
    /// The group's static provided APIs lack one of the CSV's.
    StaticApis,
}

/// The strategy's Deployments, all together.
#[derive(Clone, Debug, PartialEq)]
pub enum Health {
    Ready,
    /// Not (yet) ready: which one and why.
    NotReady(String),
    /// Will not become ready without a change (ProgressDeadlineExceeded).
    Failed(String),
}

/// Another CSV in the namespace, named by `spec.replaces` (either way round).
#[derive(Clone, Debug, PartialEq)]
pub struct Related {
    pub name: String,
    pub phase: CsvPhase,
    /// An InstallPlan that creates it is still running its steps: the bundle's objects it
    /// has not written yet still belong to the CSV it replaces alone, and would go with it.
    pub writing: bool,
}

#[derive(Clone, Debug)]
pub struct Observation {
    pub group: GroupState,
    /// Why the install strategy cannot be used as written.
    pub strategy_problem: Option<String>,
    /// Why the webhook definitions cannot be installed.
    pub webhook_problem: Option<String>,
    /// An owned API this CSV cannot take over from its owner.
    pub owner_conflict: Option<String>,
    /// Why the CSV this one replaces may not be replaced now (its OperatorCondition).
    pub not_upgradeable: Option<String>,
    /// A serving certificate is missing, unusable or due for rotation.
    pub certs_due: bool,
    /// When the earliest serving certificate is due.
    pub certs_rotate_at: Option<Timestamp>,
    /// Webhook configurations or conversions that are not (or no longer) as planned.
    pub serving_missing: Option<String>,
    /// Unmet requirements, each named; empty when all are met.
    pub unmet: Vec<String>,
    /// The CSV this one replaces, if it is still there.
    pub replaces: Option<Related>,
    /// A CSV that replaces this one.
    pub replaced_by: Option<Related>,
    pub health: Health,
    /// Look at the Deployments' pods again after this long: an Available one's pod
    /// restarted too recently to count, or a waiting one has not waited long enough for
    /// its pods to be asked why.
    pub look_again: Option<Duration>,
    pub now: Timestamp,
    pub install_check_timeout: Duration,
}

/// What one round decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub phase: CsvPhase,
    pub reason: CsvReason,
    pub message: String,
    /// Apply the install strategy (RBAC and Deployments) this round.
    pub install: bool,
    /// Delete the CSV (it was replaced).
    pub delete: bool,
    pub requeue_after: Option<Duration>,
}

impl Step {
    fn to(phase: CsvPhase, reason: CsvReason, message: impl Into<String>) -> Step {
        Step {
            phase,
            reason,
            message: message.into(),
            install: false,
            delete: false,
            requeue_after: None,
        }
    }

    fn installing(mut self) -> Step {
        self.install = true;
        self
    }

    fn requeue(mut self, after: Duration) -> Step {
        self.requeue_after = Some(after);
        self
    }
}

fn group_failure(group: &GroupState) -> Option<Step> {
    let failed = |reason, message: String| Some(Step::to(CsvPhase::Failed, reason, message));
    match group {
        GroupState::Member { .. } | GroupState::Waiting => None,
        GroupState::NoGroup => failed(
            CsvReason::NoOperatorGroup,
            "csv in namespace with no operatorgroups".into(),
        ),
        GroupState::TooMany(n) => failed(
            CsvReason::TooManyOperatorGroups,
            format!(
                "csv created in namespace with multiple operatorgroups ({n}), can't pick one automatically"
            ),
        ),
        GroupState::NoTargets => failed(
            CsvReason::NoTargetNamespaces,
            "the operatorgroup selects no target namespaces".into(),
        ),
        GroupState::Unsupported(message) => {
            failed(CsvReason::UnsupportedOperatorGroup, message.clone())
        }
        GroupState::OwnerConflict(message) => {
            failed(CsvReason::InterOperatorGroupOwnerConflict, message.clone())
        }
        GroupState::StaticApis => failed(
            CsvReason::CannotModifyStaticOperatorGroupProvidedAPIs,
            "static provided api operatorgroup cannot be modified by these apis".into(),
        ),
    }
}

fn elapsed_since(then: Option<&Time>, now: Timestamp) -> Duration {
    then.map_or(Duration::ZERO, |t| {
        let seconds = now.as_second().saturating_sub(t.0.as_second());
        Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
    })
}

/// The next step from `current` (None: never synced).
pub fn decide(current: Option<&ClusterServiceVersionStatus>, observed: &Observation) -> Step {
    let decision = Decision {
        phase: current.and_then(|s| s.phase).unwrap_or_default(),
        reason: CsvReason::read_back(current.and_then(|s| s.reason.as_deref())),
        message: current.and_then(|s| s.message.clone()).unwrap_or_default(),
        since: elapsed_since(
            current.and_then(|s| s.last_transition_time.as_ref()),
            observed.now,
        ),
        observed,
    };
    if let Some(step) = decision
        .outside_the_install()
        .or_else(|| decision.group_or_replacement())
    {
        return step;
    }
    match decision.phase {
        CsvPhase::Pending => decision.pending(),
        CsvPhase::InstallReady => decision.install_ready(),
        CsvPhase::Installing => decision.installing(),
        CsvPhase::Succeeded => decision.succeeded(),
        CsvPhase::Failed => decision.failed(),
        _ => decision.stay(),
    }
}

/// One decision: where the CSV is (phase, reason, message, for how long) and what the
/// round observed.
struct Decision<'a> {
    phase: CsvPhase,
    reason: CsvReason,
    message: String,
    since: Duration,
    observed: &'a Observation,
}

impl Decision<'_> {
    fn stay(&self) -> Step {
        Step::to(self.phase, self.reason, self.message.clone())
    }

    /// Unmet requirements are looked at again after [`UNMET_RECHECK`] as a backstop. A
    /// CRD's change wakes the CSVs still waiting only until some round reads it ready, and
    /// a round of another CSV may read it Established before the change that made it so
    /// reaches the watch. The CSVs that read it not Established were then never woken
    /// (one of 100 CSVs stayed Pending in a bulk install).
    fn unmet(&self) -> Step {
        Step::to(
            CsvPhase::Pending,
            CsvReason::RequirementsNotMet,
            format!(
                "one or more requirements couldn't be found: {}",
                self.observed.unmet.join("; ")
            ),
        )
        .requeue(UNMET_RECHECK)
    }

    fn invalid_webhook(problem: &str) -> Step {
        Step::to(
            CsvPhase::Failed,
            CsvReason::InvalidWebhookDescription,
            problem.to_string(),
        )
    }

    fn invalid(problem: &str) -> Step {
        Step::to(
            CsvPhase::Failed,
            CsvReason::InvalidInstallStrategy,
            format!("install strategy invalid: {problem}"),
        )
    }

    /// Succeeded when the Deployments are ready; Failed when they failed (not when already
    /// Failed: that is no news).
    fn health_step(&self, from_failed: bool) -> Option<Step> {
        match &self.observed.health {
            Health::Ready => Some(Step::to(
                CsvPhase::Succeeded,
                CsvReason::InstallSucceeded,
                "install strategy completed with no errors",
            )),
            Health::Failed(why) if !from_failed => Some(Step::to(
                CsvPhase::Failed,
                CsvReason::InstallCheckFailed,
                format!("install failed: {why}"),
            )),
            _ => None,
        }
    }

    /// The phases outside the install: never synced, Deleting, Replacing.
    fn outside_the_install(&self) -> Option<Step> {
        match self.phase {
            CsvPhase::None | CsvPhase::Unknown => Some(Step::to(
                CsvPhase::Pending,
                CsvReason::RequirementsUnknown,
                "requirements not yet checked",
            )),
            CsvPhase::Deleting => {
                let mut step = self.stay();
                step.delete = true;
                Some(step)
            }
            // A replacement in Replacing or Deleting had succeeded too, and is being
            // replaced in turn (an upgrade hopping over several versions): waiting for it
            // to succeed again would wait until it is gone, and this one would be
            // installed again.
            CsvPhase::Replacing => Some(match &self.observed.replaced_by {
                Some(new)
                    if !new.writing
                        && matches!(
                            new.phase,
                            CsvPhase::Succeeded | CsvPhase::Replacing | CsvPhase::Deleting
                        ) =>
                {
                    let mut step = Step::to(
                        CsvPhase::Deleting,
                        CsvReason::Replaced,
                        format!(
                            "has been replaced by a newer ClusterServiceVersion ({}) that has successfully installed",
                            new.name
                        ),
                    );
                    step.delete = true;
                    step
                }
                Some(_) => self.stay(),
                None => Step::to(
                    CsvPhase::Pending,
                    CsvReason::RequirementsUnknown,
                    "the ClusterServiceVersion replacing this one is gone",
                ),
            }),
            _ => None,
        }
    }

    /// Group problems fail the CSV from any installable phase (waiting changes nothing); a
    /// Succeeded CSV with a replacement moves to Replacing.
    fn group_or_replacement(&self) -> Option<Step> {
        let observed = self.observed;
        if observed.group == GroupState::Waiting {
            return Some(self.stay().requeue(Duration::from_secs(5)));
        }
        if let Some(failed) = group_failure(&observed.group) {
            return Some(
                if self.phase == CsvPhase::Failed
                    && self.reason == failed.reason
                    && self.message == failed.message
                {
                    match observed.group {
                        // Nothing wakes it when the winner goes (another namespace): look again.
                        GroupState::OwnerConflict(_) | GroupState::StaticApis => {
                            self.stay().requeue(REINSTALL_AFTER)
                        }
                        _ => self.stay(),
                    }
                } else {
                    failed
                },
            );
        }
        if self.phase == CsvPhase::Succeeded
            && let Some(new) = &observed.replaced_by
        {
            return Some(Step::to(
                CsvPhase::Replacing,
                CsvReason::BeingReplaced,
                format!("being replaced by csv: {}", new.name),
            ));
        }
        None
    }

    fn pending(&self) -> Step {
        let observed = self.observed;
        // Before the requirements, as upstream; the OperatorCondition's change wakes the CSV,
        // the requeue is a backstop.
        if let Some(why) = &observed.not_upgradeable {
            return Step::to(
                CsvPhase::Pending,
                CsvReason::OperatorConditionNotUpgradeable,
                format!("operator is not upgradeable: {why}"),
            )
            .requeue(Duration::from_secs(30));
        }
        if let Some(problem) = &observed.strategy_problem {
            Self::invalid(problem)
        } else if !observed.unmet.is_empty() {
            self.unmet()
        } else if let Some(problem) = &observed.webhook_problem {
            Self::invalid_webhook(problem)
        } else if let Some(conflict) = &observed.owner_conflict {
            Step::to(CsvPhase::Failed, CsvReason::OwnerConflict, conflict.clone())
        } else if let Some(old) = observed
            .replaces
            .as_ref()
            .filter(|old| !matches!(old.phase, CsvPhase::Replacing | CsvPhase::Deleting))
        {
            // The old CSV moves to Replacing on its own round; look again soon.
            Step::to(
                CsvPhase::Pending,
                CsvReason::AllRequirementsMet,
                format!("waiting for {} to enter Replacing", old.name),
            )
            .requeue(Duration::from_secs(2))
        } else {
            Step::to(
                CsvPhase::InstallReady,
                CsvReason::AllRequirementsMet,
                "all requirements found, attempting install",
            )
        }
    }

    fn install_ready(&self) -> Step {
        if let Some(problem) = &self.observed.strategy_problem {
            Self::invalid(problem)
        } else if !self.observed.unmet.is_empty() {
            self.unmet()
        } else if let Some(problem) = &self.observed.webhook_problem {
            Self::invalid_webhook(problem)
        } else {
            Step::to(
                CsvPhase::Installing,
                CsvReason::InstallSucceeded,
                "waiting for install components to report healthy",
            )
            .installing()
        }
    }

    fn installing(&self) -> Step {
        if let Some(done) = self.health_step(false) {
            return done.installing();
        }
        let observed = self.observed;
        let why = match &observed.health {
            Health::NotReady(why) => why.clone(),
            _ => String::new(),
        };
        if self.since >= observed.install_check_timeout {
            Step::to(
                CsvPhase::Failed,
                CsvReason::InstallCheckFailed,
                format!(
                    "install timeout after {:?}: {why}",
                    observed.install_check_timeout
                ),
            )
        } else {
            Step::to(
                CsvPhase::Installing,
                CsvReason::InstallWaiting,
                format!("installing: {why}"),
            )
            .installing()
            .requeue(
                (observed.install_check_timeout - self.since)
                    .min(observed.look_again.unwrap_or(HEALTH_RECHECK))
                    .min(HEALTH_RECHECK),
            )
        }
    }

    fn succeeded(&self) -> Step {
        if !self.observed.unmet.is_empty() {
            let mut step = self.unmet();
            step.phase = CsvPhase::Failed;
            return step;
        }
        if self.observed.certs_due {
            return Step::to(
                CsvPhase::Pending,
                CsvReason::NeedsCertRotation,
                "CSV owns resources that require a cert refresh",
            );
        }
        match &self.observed.health {
            // Look again when a serving certificate is due (upstream waits for a resync).
            Health::Ready => match self.observed.certs_rotate_at {
                Some(at) => {
                    let wait = at.duration_since(self.observed.now);
                    let wait = Duration::try_from(wait).unwrap_or_default();
                    self.stay()
                        .installing()
                        .requeue(wait + Duration::from_secs(1))
                }
                None => self.stay().installing(),
            },
            Health::NotReady(why) | Health::Failed(why) => Step::to(
                CsvPhase::Failed,
                CsvReason::ComponentUnhealthy,
                format!("installing: {why}"),
            ),
        }
    }

    fn failed(&self) -> Step {
        let back_to_pending = |why: &str| {
            Step::to(
                CsvPhase::Pending,
                CsvReason::RequirementsUnknown,
                format!("{why}; checking requirements again"),
            )
        };
        match self.reason {
            r if r.is_operator_group_problem() => {
                back_to_pending("the OperatorGroup is usable now")
            }
            CsvReason::InvalidInstallStrategy => match &self.observed.strategy_problem {
                Some(problem) => Self::invalid(problem),
                None => back_to_pending("the install strategy is valid now"),
            },
            CsvReason::OwnerConflict => match &self.observed.owner_conflict {
                Some(conflict) => {
                    Step::to(CsvPhase::Failed, CsvReason::OwnerConflict, conflict.clone())
                }
                None => back_to_pending("no other CSV owns its APIs now"),
            },
            CsvReason::InvalidWebhookDescription => match &self.observed.webhook_problem {
                Some(problem) => Self::invalid_webhook(problem),
                None => back_to_pending("the webhook definitions are valid now"),
            },
            CsvReason::RequirementsNotMet if self.observed.unmet.is_empty() => {
                back_to_pending("requirements are met now")
            }
            // As upstream: a failed CSV whose requirements are missing waits for them in
            // Pending (a requirement lost after Succeeded ends there).
            _ if !self.observed.unmet.is_empty() => self.unmet(),
            CsvReason::ComponentUnhealthy | CsvReason::InstallCheckFailed => {
                match (self.health_step(true), self.observed.look_again) {
                    (Some(healed), _) => healed,
                    // An unhealthy Deployment that was changed or deleted is put back; one
                    // Available again whose pods just restarted is looked at once they
                    // have run long enough (nothing else wakes the CSV then).
                    (None, Some(after)) => self.stay().installing().requeue(after),
                    (None, None) => self.stay().installing(),
                }
            }
            _ if self.since >= REINSTALL_AFTER => Step::to(
                CsvPhase::Pending,
                CsvReason::NeedsReinstall,
                "retrying the install after a failure",
            ),
            _ => self.stay().requeue(REINSTALL_AFTER - self.since),
        }
    }
}

/// The step after the strategy was applied: a failed install fails the CSV with what
/// failed, and is tried again later.
pub fn after_install(step: Step, applied: Result<(), &InstallError>) -> Step {
    let failed = |message: String| {
        Step::to(CsvPhase::Failed, CsvReason::InstallComponentFailed, message)
            .requeue(REINSTALL_AFTER)
    };
    match applied {
        Ok(()) => step,
        Err(error) => failed(error.to_string()),
    }
}

/// Whether `step` changes the phase or reason of `current` (an Event-worthy transition).
/// Whether `step` leads to a phase that waits for nothing the round has not observed
/// already: a new CSV's Pending (requirements not yet checked) and InstallReady (requirements
/// met, install next). Upstream writes and re-reads each; taking them in the same round
/// saves two status writes and two watch round trips per install.
fn passes_through(current: Option<&ClusterServiceVersionStatus>, step: &Step) -> bool {
    is_transition(current, step)
        && !step.install
        && !step.delete
        && step.requeue_after.is_none()
        && (step.phase == CsvPhase::InstallReady
            || step.phase == CsvPhase::Pending && step.reason == CsvReason::RequirementsUnknown)
}

/// The pass-through steps from `current`, and the status they lead to (None when there are
/// none). Each step keeps its history entry and its Event; only the writes are merged.
pub fn pass_through(
    current: Option<&ClusterServiceVersionStatus>,
    observed: &Observation,
    requirement_status: &[RequirementStatus],
    now: Timestamp,
) -> (Vec<Step>, Option<ClusterServiceVersionStatus>) {
    let mut passed = Vec::new();
    let mut status: Option<ClusterServiceVersionStatus> = None;
    // Pending, then InstallReady: at most two, whatever decide says.
    for _ in 0..2 {
        let from = status.as_ref().or(current);
        let step = decide(from, observed);
        if !passes_through(from, &step) {
            break;
        }
        status = Some(next_status(from, &step, requirement_status.to_vec(), now));
        passed.push(step);
    }
    (passed, status)
}

pub fn is_transition(current: Option<&ClusterServiceVersionStatus>, step: &Step) -> bool {
    current.and_then(|s| s.phase) != Some(step.phase)
        || current.and_then(|s| s.reason.as_deref()) != Some(step.reason.as_str())
}

/// The status to write for `step`. Timestamps and history move only on a transition;
/// a new message in the same phase and reason moves `lastUpdateTime` only.
pub fn next_status(
    current: Option<&ClusterServiceVersionStatus>,
    step: &Step,
    requirement_status: Vec<RequirementStatus>,
    now: Timestamp,
) -> ClusterServiceVersionStatus {
    let mut status = current.cloned().unwrap_or_default();
    let transition = is_transition(current, step);
    let message_changed = status.message.as_deref() != Some(step.message.as_str());
    if transition {
        status.last_transition_time = Some(Time(now));
        status.last_update_time = Some(Time(now));
        status.conditions.push(CsvCondition {
            phase: Some(step.phase),
            reason: Some(step.reason.as_str().into()),
            message: Some(step.message.clone()),
            last_update_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
        });
        let excess = status.conditions.len().saturating_sub(HISTORY_LIMIT);
        status.conditions.drain(..excess);
    } else if message_changed {
        status.last_update_time = Some(Time(now));
    }
    status.phase = Some(step.phase);
    status.reason = Some(step.reason.as_str().into());
    status.message = Some(step.message.clone());
    status.requirement_status = requirement_status;
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn member() -> GroupState {
        GroupState::Member {
            group: "og".into(),
            targets: vec!["ns".into()],
        }
    }

    fn observed() -> Observation {
        Observation {
            group: member(),
            strategy_problem: None,
            webhook_problem: None,
            not_upgradeable: None,
            owner_conflict: None,
            certs_due: false,
            certs_rotate_at: None,
            serving_missing: None,
            unmet: vec![],
            replaces: None,
            replaced_by: None,
            health: Health::Ready,
            look_again: None,
            now: at(100),
            install_check_timeout: Duration::from_secs(300),
        }
    }

    fn status(phase: CsvPhase, reason: CsvReason, since: i64) -> ClusterServiceVersionStatus {
        ClusterServiceVersionStatus {
            phase: Some(phase),
            reason: Some(reason.as_str().into()),
            message: Some("m".into()),
            last_transition_time: Some(Time(at(since))),
            last_update_time: Some(Time(at(since))),
            ..ClusterServiceVersionStatus::default()
        }
    }

    fn next(
        current: Option<ClusterServiceVersionStatus>,
        o: &Observation,
    ) -> (CsvPhase, CsvReason) {
        let step = decide(current.as_ref(), o);
        (step.phase, step.reason)
    }

    use CsvPhase::{Deleting, Failed, InstallReady, Installing, Pending, Replacing, Succeeded};

    fn passed(
        current: Option<ClusterServiceVersionStatus>,
        o: &Observation,
    ) -> Vec<(CsvPhase, CsvReason)> {
        let (steps, _) = pass_through(current.as_ref(), o, &[], at(100));
        steps.iter().map(|s| (s.phase, s.reason)).collect()
    }

    #[test]
    fn a_new_csv_passes_through_pending_and_install_ready_in_one_round() {
        let o = observed();
        assert_eq!(
            passed(None, &o),
            [
                (Pending, CsvReason::RequirementsUnknown),
                (InstallReady, CsvReason::AllRequirementsMet)
            ]
        );
        let (_, status) = pass_through(None, &o, &[], at(100));
        let status = status.unwrap();
        let history: Vec<_> = status.conditions.iter().map(|c| c.phase).collect();
        assert_eq!(history, [Some(Pending), Some(InstallReady)]);
        // The round then installs.
        let step = decide(Some(&status), &o);
        assert_eq!((step.phase, step.install), (Installing, true));
    }

    #[test]
    fn waiting_phases_are_not_passed_through() {
        let mut unmet = observed();
        unmet.unmet = vec!["CRD x".into()];
        assert_eq!(
            passed(None, &unmet),
            [(Pending, CsvReason::RequirementsUnknown)]
        );
        assert!(
            passed(
                Some(status(Pending, CsvReason::RequirementsNotMet, 0)),
                &unmet
            )
            .is_empty()
        );
        let mut waiting = observed();
        waiting.group = GroupState::Waiting;
        assert_eq!(
            passed(None, &waiting),
            [(Pending, CsvReason::RequirementsUnknown)]
        );
        // A steady or installing CSV has nothing to pass.
        assert!(
            passed(
                Some(status(Succeeded, CsvReason::InstallSucceeded, 0)),
                &observed()
            )
            .is_empty()
        );
        assert!(
            passed(
                Some(status(Installing, CsvReason::InstallWaiting, 0)),
                &observed()
            )
            .is_empty()
        );
        let mut replacing = observed();
        replacing.replaces = Some(Related {
            name: "old".into(),
            phase: Succeeded,
            writing: false,
        });
        // Waiting for the old CSV to enter Replacing is not passed through.
        assert_eq!(
            passed(None, &replacing),
            [(Pending, CsvReason::RequirementsUnknown)]
        );
    }

    #[test]
    fn row_first_sync_is_pending_requirements_unknown() {
        assert_eq!(
            next(None, &observed()),
            (Pending, CsvReason::RequirementsUnknown)
        );
    }

    #[test]
    fn row_pending_with_unmet_requirements_names_them() {
        let o = Observation {
            unmet: vec!["CRD widgets.example.com not present".into()],
            ..observed()
        };
        let step = decide(
            Some(&status(Pending, CsvReason::RequirementsUnknown, 0)),
            &o,
        );
        assert_eq!(
            (step.phase, step.reason),
            (Pending, CsvReason::RequirementsNotMet)
        );
        // Looked at again even if no change wakes it.
        assert_eq!(step.requeue_after, Some(UNMET_RECHECK));
        assert!(
            step.message.contains("widgets.example.com"),
            "{}",
            step.message
        );
    }

    #[test]
    fn row_pending_with_a_bad_strategy_fails() {
        let o = Observation {
            strategy_problem: Some("unsupported strategy \"helm\"".into()),
            ..observed()
        };
        assert_eq!(
            next(Some(status(Pending, CsvReason::RequirementsUnknown, 0)), &o),
            (Failed, CsvReason::InvalidInstallStrategy)
        );
    }

    #[test]
    fn row_pending_all_met_waits_for_the_replaced_csv_then_is_install_ready() {
        let pending = status(Pending, CsvReason::RequirementsUnknown, 0);
        assert_eq!(
            next(Some(pending.clone()), &observed()),
            (InstallReady, CsvReason::AllRequirementsMet)
        );
        let old = |phase| Observation {
            replaces: Some(Related {
                name: "op.v1".into(),
                phase,
                writing: false,
            }),
            ..observed()
        };
        let waiting = decide(Some(&pending), &old(Succeeded));
        assert_eq!(waiting.phase, Pending);
        assert!(waiting.message.contains("op.v1"));
        assert_eq!(
            next(Some(pending), &old(Replacing)),
            (InstallReady, CsvReason::AllRequirementsMet)
        );
    }

    #[test]
    fn row_install_ready_applies_then_installing_or_failed() {
        let step = decide(
            Some(&status(InstallReady, CsvReason::AllRequirementsMet, 0)),
            &observed(),
        );
        assert!(step.install);
        assert_eq!(
            (step.phase, step.reason),
            (Installing, CsvReason::InstallSucceeded)
        );
        let error = InstallError::Write {
            kind: "Deployment".into(),
            name: "x".into(),
            message: "Deployment.apps \"x\" is invalid".into(),
        };
        let failed = after_install(step, Err(&error));
        assert_eq!(
            (failed.phase, failed.reason),
            (Failed, CsvReason::InstallComponentFailed)
        );
        assert!(failed.message.contains("is invalid"));
    }

    #[test]
    fn row_installing_succeeds_when_healthy_waits_then_times_out() {
        let installing = status(Installing, CsvReason::InstallSucceeded, 0);
        assert_eq!(
            next(Some(installing.clone()), &observed()),
            (Succeeded, CsvReason::InstallSucceeded)
        );
        let unready = Observation {
            health: Health::NotReady("deployment op not available".into()),
            ..observed()
        };
        let waiting = decide(Some(&installing), &unready);
        assert_eq!(
            (waiting.phase, waiting.reason),
            (Installing, CsvReason::InstallWaiting)
        );
        assert_eq!(waiting.message, "installing: deployment op not available");
        // Pods change no Deployment when they fail: the CSV looks again on its own, and
        // never later than the timeout.
        assert_eq!(waiting.requeue_after, Some(HEALTH_RECHECK));
        // A rollout that moved a moment ago has its pods asked once it has waited enough.
        let moved = Observation {
            look_again: Some(Duration::from_secs(4)),
            ..unready.clone()
        };
        let soon = decide(Some(&installing), &moved);
        assert_eq!(soon.requeue_after, Some(Duration::from_secs(4)));
        let almost = Observation {
            now: at(290),
            ..unready.clone()
        };
        let last = decide(Some(&installing), &almost);
        assert_eq!(last.requeue_after, Some(Duration::from_secs(10)));
        let late = Observation {
            now: at(301),
            ..unready
        };
        assert_eq!(
            next(Some(installing.clone()), &late),
            (Failed, CsvReason::InstallCheckFailed)
        );
        let deadline = Observation {
            health: Health::Failed("ProgressDeadlineExceeded".into()),
            ..observed()
        };
        let failed = decide(Some(&installing), &deadline);
        assert_eq!(
            (failed.phase, failed.reason, failed.message.as_str()),
            (
                Failed,
                CsvReason::InstallCheckFailed,
                "install failed: ProgressDeadlineExceeded"
            )
        );
    }

    #[test]
    fn row_succeeded_replaced_unhealthy_or_requirements_lost() {
        let succeeded = status(Succeeded, CsvReason::InstallSucceeded, 0);
        let steady = decide(Some(&succeeded), &observed());
        assert_eq!(steady.phase, Succeeded);
        assert!(!is_transition(Some(&succeeded), &steady));
        let replaced = Observation {
            replaced_by: Some(Related {
                name: "op.v2".into(),
                phase: Pending,
                writing: false,
            }),
            ..observed()
        };
        assert_eq!(
            next(Some(succeeded.clone()), &replaced),
            (Replacing, CsvReason::BeingReplaced)
        );
        let broken = Observation {
            health: Health::NotReady("deployment op has 0 available".into()),
            ..observed()
        };
        assert_eq!(
            next(Some(succeeded.clone()), &broken),
            (Failed, CsvReason::ComponentUnhealthy)
        );
        let lost = Observation {
            unmet: vec!["CRD gone".into()],
            ..observed()
        };
        let failed = next(Some(succeeded), &lost);
        assert_eq!(failed, (Failed, CsvReason::RequirementsNotMet));
        // Then it waits in Pending, as upstream (a Failed CSV whose requirements are missing).
        for reason in [CsvReason::RequirementsNotMet, CsvReason::ComponentUnhealthy] {
            assert_eq!(
                next(Some(status(Failed, reason, 0)), &lost),
                (Pending, CsvReason::RequirementsNotMet),
                "{reason:?}"
            );
        }
    }

    #[test]
    fn row_failed_recovers_when_the_cause_clears() {
        assert_eq!(
            next(
                Some(status(Failed, CsvReason::ComponentUnhealthy, 0)),
                &observed()
            ),
            (Succeeded, CsvReason::InstallSucceeded)
        );
        // Available again, but its pod restarted a moment ago: still Failed, looked at
        // again once the pod has run long enough.
        let look_again = Observation {
            health: Health::NotReady("waiting for deployment op to become ready: pod".into()),
            look_again: Some(Duration::from_secs(22)),
            ..observed()
        };
        let wait = decide(
            Some(&status(Failed, CsvReason::ComponentUnhealthy, 0)),
            &look_again,
        );
        assert_eq!(
            (wait.phase, wait.reason, wait.requeue_after),
            (
                Failed,
                CsvReason::ComponentUnhealthy,
                Some(Duration::from_secs(22))
            )
        );
        assert_eq!(
            next(
                Some(status(Failed, CsvReason::UnsupportedOperatorGroup, 0)),
                &observed()
            ),
            (Pending, CsvReason::RequirementsUnknown)
        );
        assert_eq!(
            next(
                Some(status(Failed, CsvReason::InvalidInstallStrategy, 0)),
                &observed()
            ),
            (Pending, CsvReason::RequirementsUnknown)
        );
        let recent = status(Failed, CsvReason::InstallComponentFailed, 90);
        let wait = decide(Some(&recent), &observed());
        assert_eq!(wait.phase, Failed);
        assert_eq!(wait.requeue_after, Some(Duration::from_secs(50)));
        assert_eq!(
            next(
                Some(status(Failed, CsvReason::InstallComponentFailed, 0)),
                &observed()
            ),
            (Pending, CsvReason::NeedsReinstall)
        );
    }

    #[test]
    fn row_replacing_goes_deleting_when_the_new_one_succeeded() {
        let replacing = status(Replacing, CsvReason::BeingReplaced, 0);
        let new = |phase, writing| Observation {
            replaced_by: Some(Related {
                name: "op.v2".into(),
                phase,
                writing,
            }),
            ..observed()
        };
        assert_eq!(
            next(Some(replacing.clone()), &new(Installing, false)),
            (Replacing, CsvReason::BeingReplaced)
        );
        for installed in [Succeeded, Replacing, Deleting] {
            let step = decide(Some(&replacing), &new(installed, false));
            assert_eq!((step.phase, step.reason), (Deleting, CsvReason::Replaced));
            assert!(step.delete);
            // Its plan still writing the bundle: what it has not written yet is still the
            // old CSV's alone, and would go with it.
            let step = decide(Some(&replacing), &new(installed, true));
            assert_eq!(step.phase, Replacing);
            assert!(!step.delete);
        }
        assert!(decide(Some(&status(Deleting, CsvReason::Replaced, 0)), &observed()).delete);
    }

    #[test]
    fn group_problems_fail_the_csv_with_upstream_reasons() {
        for (group, reason) in [
            (GroupState::NoGroup, CsvReason::NoOperatorGroup),
            (GroupState::TooMany(2), CsvReason::TooManyOperatorGroups),
            (GroupState::NoTargets, CsvReason::NoTargetNamespaces),
            (
                GroupState::Unsupported("AllNamespaces InstallModeType not supported".into()),
                CsvReason::UnsupportedOperatorGroup,
            ),
        ] {
            let o = Observation {
                group,
                ..observed()
            };
            assert_eq!(
                next(Some(status(Pending, CsvReason::RequirementsUnknown, 0)), &o),
                (Failed, reason)
            );
            assert_eq!(
                next(Some(status(Succeeded, CsvReason::InstallSucceeded, 0)), &o),
                (Failed, reason)
            );
        }
        let waiting = Observation {
            group: GroupState::Waiting,
            ..observed()
        };
        let pending = status(Pending, CsvReason::RequirementsUnknown, 0);
        assert!(!is_transition(
            Some(&pending),
            &decide(Some(&pending), &waiting)
        ));
    }

    #[test]
    fn only_a_csv_whose_history_went_past_install_ready_may_have_left_objects_behind() {
        assert!(never_installed(None));
        let mut status: Option<ClusterServiceVersionStatus> = None;
        let mut history = Vec::new();
        for (second, phase, reason) in [
            (0, Pending, CsvReason::RequirementsUnknown),
            (1, InstallReady, CsvReason::AllRequirementsMet),
            (2, Installing, CsvReason::InstallSucceeded),
            // Back to InstallReady after a failure: the history still shows the install.
            (3, InstallReady, CsvReason::AllRequirementsMet),
        ] {
            let next = next_status(
                status.as_ref(),
                &Step::to(phase, reason, ""),
                vec![],
                at(second),
            );
            history.push(never_installed(Some(&next)));
            status = Some(next);
        }
        assert_eq!(history, [true, true, false, false]);
        let ready = next_status(
            None,
            &Step::to(InstallReady, CsvReason::AllRequirementsMet, ""),
            vec![],
            at(1),
        );
        // A capped history hides what came before it.
        let mut capped = ready.clone();
        capped.conditions = vec![capped.conditions[0].clone(); HISTORY_LIMIT];
        assert!(!never_installed(Some(&capped)));
        // A serving certificate was written by an install.
        let mut certified = ready;
        certified.certs_last_updated = Some(Time(at(1)));
        assert!(!never_installed(Some(&certified)));
    }

    #[test]
    fn timestamps_and_history_move_only_on_transitions() {
        let first = decide(None, &observed());
        let s1 = next_status(None, &first, vec![], at(0));
        assert_eq!(s1.conditions.len(), 1);
        // Same step again later: identical status, so nothing is written.
        let s2 = next_status(Some(&s1), &first, vec![], at(50));
        assert_eq!(s1, s2);
        // A new message in the same phase: lastUpdateTime only.
        let mut reworded = first;
        reworded.message = "other".into();
        let s3 = next_status(Some(&s2), &reworded, vec![], at(60));
        assert_eq!(s3.last_transition_time, s1.last_transition_time);
        assert_eq!(s3.last_update_time, Some(Time(at(60))));
        assert_eq!(s3.conditions.len(), 1);
        // History is capped.
        let mut status = s3;
        for i in 0..30 {
            let phase = if i % 2 == 0 { Failed } else { Succeeded };
            let step = Step::to(phase, CsvReason::ComponentUnhealthy, "x");
            status = next_status(Some(&status), &step, vec![], at(100 + i));
        }
        assert_eq!(status.conditions.len(), HISTORY_LIMIT);
    }

    #[test]
    fn webhooks_fail_on_a_bad_definition_and_rotate_through_pending() {
        let bad = Observation {
            webhook_problem: Some("webhook v: deployment x is not in the install strategy".into()),
            ..observed()
        };
        let pending = status(CsvPhase::Pending, CsvReason::RequirementsUnknown, 90);
        let failed = decide(Some(&pending), &bad);
        assert_eq!(
            (failed.phase, failed.reason),
            (CsvPhase::Failed, CsvReason::InvalidWebhookDescription)
        );
        assert!(failed.message.contains("webhook v"), "{}", failed.message);
        let stored = status(CsvPhase::Failed, CsvReason::InvalidWebhookDescription, 90);
        assert_eq!(decide(Some(&stored), &observed()).phase, CsvPhase::Pending);

        let succeeded = status(CsvPhase::Succeeded, CsvReason::InstallSucceeded, 90);
        let due = Observation {
            certs_due: true,
            ..observed()
        };
        let step = decide(Some(&succeeded), &due);
        assert_eq!(
            (step.phase, step.reason, step.install),
            (CsvPhase::Pending, CsvReason::NeedsCertRotation, false)
        );
        // Not due yet: Succeeded, and a look when it will be.
        let later = Observation {
            certs_rotate_at: Some(at(160)),
            ..observed()
        };
        let step = decide(Some(&succeeded), &later);
        assert_eq!(step.phase, CsvPhase::Succeeded);
        assert_eq!(step.requeue_after, Some(Duration::from_secs(61)));
    }

    #[test]
    fn a_not_upgradeable_predecessor_holds_the_new_csv_pending() {
        let held = Observation {
            not_upgradeable: Some("the operator is not upgradeable: migrating".into()),
            ..observed()
        };
        let pending = status(CsvPhase::Pending, CsvReason::RequirementsUnknown, 90);
        let step = decide(Some(&pending), &held);
        assert_eq!(
            (step.phase, step.reason),
            (
                CsvPhase::Pending,
                CsvReason::OperatorConditionNotUpgradeable
            )
        );
        assert_eq!(
            step.message,
            "operator is not upgradeable: the operator is not upgradeable: migrating"
        );
        let step = decide(Some(&pending), &observed());
        assert_eq!(step.phase, CsvPhase::InstallReady);
    }
}
