//! The decide step of the CatalogSource controller: from what a round observed to the status
//! the object should have and the Events that announce a change. Pure, so the rules are
//! unit-tested without a cluster, and equal observations give an equal status (compared with
//! `==` before any write), which is what keeps a steady state free of writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::{
    CatalogSourceReason, CatalogSourceStatus, ConfigMapResourceReference, GrpcConnectionState,
    RegistryServiceStatus,
};
use crate::controllers::kit::{Cond, ConditionStatus};

pub const CONDITION_CONNECTED: &str = "Connected";
pub const CONDITION_CATALOG_LOADED: &str = "CatalogLoaded";
/// False while a spec field is unusable (today: `registryPoll.interval`); absent otherwise.
pub const CONDITION_SPEC_VALID: &str = "SpecValid";
/// False after a reconcile panicked; the next successful round removes it.
pub const CONDITION_RECONCILED: &str = "Reconciled";

/// The condition types this controller owns (applies under its field manager); conditions
/// of other types belong to other writers and are never sent.
pub const OWN_CONDITIONS: [&str; 6] = [
    CONDITION_CONNECTED,
    CONDITION_CATALOG_LOADED,
    CONDITION_SPEC_VALID,
    CONDITION_RECONCILED,
    super::template::CONDITION_TEMPLATES_RESOLVED,
    super::template::CONDITION_RESOLVED_IMAGE,
];

/// gRPC connectivity states upstream reports in `connectionState.lastObservedState`.
pub const STATE_READY: &str = "READY";
pub const STATE_TRANSIENT_FAILURE: &str = "TRANSIENT_FAILURE";

/// Whether the source of the content could be reached this round.
#[derive(Clone, Debug, PartialEq)]
pub enum Connection {
    /// The registry server answered SERVING, or the ConfigMap was read.
    Ready {
        address: Option<String>,
        message: String,
    },
    Failed {
        address: Option<String>,
        reason: CatalogSourceReason,
        message: String,
    },
    /// The spec cannot work as written; nothing was attempted.
    InvalidSpec { message: String },
}

/// Size and digest of a loaded catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct ContentSummary {
    pub packages: usize,
    pub bundles: usize,
    pub digest: String,
}

/// What the controller knows about the catalog's content.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Nothing loaded yet, and no load failed.
    NotLoaded,
    /// The snapshot in use.
    Loaded(ContentSummary),
    /// The last load failed; `last_good` is the snapshot still in use, if any.
    Failed {
        reason: CatalogSourceReason,
        message: String,
        last_good: Option<ContentSummary>,
    },
}

#[derive(Clone, Debug)]
pub struct Observation {
    pub connection: Connection,
    pub content: Content,
    pub config_map: Option<ConfigMapResourceReference>,
    /// A spec field that cannot be used as written, and what is done instead.
    pub spec_problem: Option<String>,
    pub generation: Option<i64>,
    pub now: Timestamp,
    /// Image catalogs: when the image in use was pulled (`status.latestImageRegistryPoll`;
    /// it moves only with the digest, so a steady poll writes nothing).
    pub image_pulled_at: Option<Timestamp>,
    /// What serves the catalog (`status.registryService`, its `createdAt` left to decide).
    pub registry_service: Option<RegistryServiceStatus>,
    /// What the `olm.catalogImageTemplate` annotation gave, when the object has one.
    pub template: Option<super::template::Resolution>,
}

/// `status.registryService` for a catalog: the registry server at `spec.address` (protocol
/// grpc, its host and port), or OLM itself for catalogs it serves from its own snapshot
/// (ConfigMap and image catalogs: protocol `in-process`, named after the CatalogSource).
pub fn registry_service(
    name: &str,
    namespace: &str,
    address: Option<&str>,
) -> RegistryServiceStatus {
    let (protocol, service_name, port) = match address.map(str::trim).filter(|a| !a.is_empty()) {
        Some(address) => {
            let (host, port) = address.rsplit_once(':').unwrap_or((address, ""));
            (
                "grpc",
                host.trim_matches(['[', ']']).to_string(),
                port.to_string(),
            )
        }
        None => ("in-process", name.to_string(), String::new()),
    };
    RegistryServiceStatus {
        protocol: Some(protocol.to_string()),
        service_name: Some(service_name),
        service_namespace: Some(namespace.to_string()),
        port: Some(port).filter(|p| !p.is_empty()),
        created_at: None,
    }
}

/// An Event to publish on the CatalogSource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Announcement {
    pub warning: bool,
    pub reason: String,
    pub note: String,
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

fn describe(summary: &ContentSummary) -> String {
    format!(
        "{} packages, {} bundles (content digest {})",
        summary.packages,
        summary.bundles,
        short(&summary.digest)
    )
}

/// This round's conditions: its generation and time, and a transition time kept while a
/// condition's status holds.
struct Conditions<'a> {
    current: Option<&'a CatalogSourceStatus>,
    generation: Option<i64>,
    now: Timestamp,
}

impl Conditions<'_> {
    fn make(
        &self,
        type_: &str,
        ok: bool,
        reason: CatalogSourceReason,
        message: String,
    ) -> Condition {
        let previous = self
            .current
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_));
        Cond::new(type_, ok, reason, message).into_meta(previous, self.generation, self.now)
    }

    /// `connectionState` and the Connected condition.
    fn connection(&self, connection: &Connection) -> (Option<GrpcConnectionState>, Condition) {
        let state = |address: &Option<String>, state: &str| {
            Some(connection_state(self.current, address, state, self.now))
        };
        match connection {
            Connection::Ready { address, message } => (
                state(address, STATE_READY),
                self.make(
                    CONDITION_CONNECTED,
                    true,
                    CatalogSourceReason::Connected,
                    message.clone(),
                ),
            ),
            Connection::Failed {
                address,
                reason,
                message,
            } => (
                state(address, STATE_TRANSIENT_FAILURE),
                self.make(CONDITION_CONNECTED, false, *reason, message.clone()),
            ),
            Connection::InvalidSpec { message } => (
                None,
                self.make(
                    CONDITION_CONNECTED,
                    false,
                    CatalogSourceReason::SpecInvalidError,
                    message.clone(),
                ),
            ),
        }
    }

    /// The CatalogLoaded condition.
    fn loaded(&self, content: &Content, connection: &Connection) -> Condition {
        let (ok, reason, message) = match content {
            Content::Loaded(summary) => (true, CatalogSourceReason::Loaded, describe(summary)),
            Content::Failed {
                reason,
                message,
                last_good,
            } => (
                false,
                *reason,
                match last_good {
                    Some(summary) => format!(
                        "{message}; still using the last good content: {}",
                        describe(summary)
                    ),
                    None => format!("{message}; no content loaded"),
                },
            ),
            Content::NotLoaded => (
                false,
                CatalogSourceReason::NotLoaded,
                match connection {
                    Connection::Ready { .. } => "not loaded yet".to_string(),
                    Connection::Failed { message, .. } | Connection::InvalidSpec { message } => {
                        format!("not loaded: {message}")
                    }
                },
            ),
        };
        self.make(CONDITION_CATALOG_LOADED, ok, reason, message)
    }
}

pub fn desired_status(
    current: Option<&CatalogSourceStatus>,
    observed: &Observation,
) -> CatalogSourceStatus {
    let conditions = Conditions {
        current,
        generation: observed.generation,
        now: observed.now,
    };
    let (mut grpc_state, connected) = conditions.connection(&observed.connection);
    let loaded = conditions.loaded(&observed.content, &observed.connection);
    // New content is a new connection in upstream's terms (its registry pod is replaced), and
    // clients wait for `lastConnect` to move past their change: it moves with each reload.
    let reloaded = matches!(observed.content, Content::Loaded(_))
        && current
            .and_then(|c| {
                c.conditions
                    .iter()
                    .find(|c| c.type_ == CONDITION_CATALOG_LOADED)
            })
            .is_some_and(|before| before.message != loaded.message);
    if reloaded && let Some(state) = grpc_state.as_mut() {
        state.last_connect = Some(Time(observed.now));
    }
    // Content refused with nothing loaded before is no working catalog: never READY (upstream's
    // registry would not come up on it), so clients waiting for READY do not go on.
    if let (
        Content::Failed {
            last_good: None, ..
        },
        Some(state),
    ) = (&observed.content, grpc_state.as_mut())
        && state.last_observed_state == STATE_READY
    {
        *state = connection_state(
            current,
            &state.address,
            STATE_TRANSIENT_FAILURE,
            observed.now,
        );
    }
    let spec_valid = observed.spec_problem.as_ref().map(|message| {
        conditions.make(
            CONDITION_SPEC_VALID,
            false,
            CatalogSourceReason::InvalidIntervalError,
            message.clone(),
        )
    });

    let first_failure = first_failure(observed, &connected, &loaded, spec_valid.as_ref());
    let mut status = current.cloned().unwrap_or_default();
    status.connection_state = grpc_state;
    status.reason = first_failure.map(|c| c.reason.clone());
    status.message = first_failure.map(|c| c.message.clone());
    status.config_map_reference = observed.config_map.clone().or(status.config_map_reference);
    status.registry_service = observed.registry_service.clone().map(|mut service| {
        // Created when what serves the catalog last changed.
        let previous = status.registry_service.take();
        service.created_at = previous
            .filter(|p| {
                RegistryServiceStatus {
                    created_at: None,
                    ..p.clone()
                } == service
            })
            .and_then(|p| p.created_at)
            .or(Some(Time(observed.now)));
        service
    });
    if let Some(at) = observed.image_pulled_at {
        let seconds = Timestamp::from_second(at.as_second()).unwrap_or(at);
        status.latest_image_registry_poll = Some(Time(seconds));
    }
    // Conditions of other types (set by someone else) are kept; ours are replaced in place,
    // and ours that no longer apply (a fixed interval, a past panic) are removed.
    let mut ours = vec![connected, loaded];
    ours.extend(spec_valid);
    ours.extend(template_conditions(&conditions, observed.template.as_ref()));
    status.conditions.retain(|c| {
        !OWN_CONDITIONS.contains(&c.type_.as_str()) || ours.iter().any(|o| o.type_ == c.type_)
    });
    for new in ours {
        match status.conditions.iter_mut().find(|c| c.type_ == new.type_) {
            Some(slot) => *slot = new,
            None => status.conditions.push(new),
        }
    }
    status
}

/// The condition that gives `status.reason` and `message`, in upstream's order: a spec it
/// cannot use at all, then the poll interval (named whatever state the source is in), then
/// the source, then its content.
fn first_failure<'a>(
    observed: &Observation,
    connected: &'a Condition,
    loaded: &'a Condition,
    spec_valid: Option<&'a Condition>,
) -> Option<&'a Condition> {
    let unusable_spec = matches!(observed.connection, Connection::InvalidSpec { .. });
    let order = if unusable_spec {
        [Some(connected), spec_valid, Some(loaded)]
    } else {
        [spec_valid, Some(connected), Some(loaded)]
    };
    order
        .into_iter()
        .flatten()
        .find(|c| !ConditionStatus::True.is(&c.status))
}

/// Upstream's clients take a ConfigMap catalog as updated once `lastConnect` is after the
/// reference's `lastUpdateTime`, compared as the API writes them (whole seconds). Upstream's
/// new registry pod connects seconds after the change; ours reloads within the same second,
/// so `lastConnect` moves once that second has passed: the returned wait brings the
/// controller back then. None when nothing is left to do.
pub fn connect_after_update(
    status: &mut CatalogSourceStatus,
    now: Timestamp,
) -> Option<std::time::Duration> {
    let updated = status
        .config_map_reference
        .as_ref()?
        .last_update_time
        .as_ref()?
        .0
        .as_second();
    let state = status
        .connection_state
        .as_mut()
        .filter(|s| s.last_observed_state == STATE_READY)?;
    if state.last_connect.as_ref().map(|t| t.0.as_second()) > Some(updated) {
        return None;
    }
    if now.as_second() > updated {
        state.last_connect = Some(Time(now));
        return None;
    }
    let next_second = Timestamp::from_second(updated + 1).ok()?;
    let wait = now.duration_until(next_second).unsigned_abs();
    Some(wait + std::time::Duration::from_millis(20))
}

/// Upstream's two conditions of a catalog image template (none without the annotation).
fn template_conditions(
    conditions: &Conditions<'_>,
    template: Option<&super::template::Resolution>,
) -> Vec<Condition> {
    use super::template::{CONDITION_RESOLVED_IMAGE, CONDITION_TEMPLATES_RESOLVED, Resolution};
    let (ok, resolved_message, image) = match template {
        None => return Vec::new(),
        Some(Resolution::Image(image)) => (
            true,
            "catalog image reference was successfully resolved".to_string(),
            image.clone(),
        ),
        Some(Resolution::Unresolved { processed, message }) => {
            (false, message.clone(), processed.clone())
        }
    };
    let reason = if ok {
        CatalogSourceReason::AllTemplatesResolved
    } else {
        CatalogSourceReason::UnableToResolve
    };
    vec![
        conditions.make(CONDITION_TEMPLATES_RESOLVED, ok, reason, resolved_message),
        conditions.make(CONDITION_RESOLVED_IMAGE, ok, reason, image),
    ]
}

/// What this controller applies: the fields it owns, and only its own conditions. Another
/// writer's conditions are not sent, so server-side apply neither takes nor removes them.
pub fn owned_fields(status: &CatalogSourceStatus) -> CatalogSourceStatus {
    CatalogSourceStatus {
        conditions: status
            .conditions
            .iter()
            .filter(|c| OWN_CONDITIONS.contains(&c.type_.as_str()))
            .cloned()
            .collect(),
        ..status.clone()
    }
}

/// The status a panicked round applies: the fields it owns as they are, plus `Reconciled`
/// False naming the panic (the next good round removes it).
pub fn panicked_status(
    current: Option<&CatalogSourceStatus>,
    panic: String,
    generation: Option<i64>,
    now: Timestamp,
) -> CatalogSourceStatus {
    let mut status = owned_fields(&current.cloned().unwrap_or_default());
    let failed = Conditions {
        current: Some(&status),
        generation,
        now,
    }
    .make(
        CONDITION_RECONCILED,
        false,
        CatalogSourceReason::Panicked,
        panic,
    );
    status
        .conditions
        .retain(|c| c.type_ != CONDITION_RECONCILED);
    status.reason = Some(failed.reason.clone());
    status.message = Some(failed.message.clone());
    status.conditions.push(failed);
    status
}

fn connection_state(
    current: Option<&CatalogSourceStatus>,
    address: &Option<String>,
    state: &str,
    now: Timestamp,
) -> GrpcConnectionState {
    let previous = current.and_then(|s| s.connection_state.as_ref());
    // `lastConnect` records when the state was entered, so that polling does not rewrite it.
    let last_connect = previous
        .filter(|p| p.last_observed_state == state && &p.address == address)
        .and_then(|p| p.last_connect.clone())
        .unwrap_or(Time(now));
    GrpcConnectionState {
        address: address.clone(),
        last_observed_state: state.into(),
        last_connect: Some(last_connect),
    }
}

/// The Events a status change deserves: one per condition whose status, reason or message
/// changed (a new content digest is a new message, so an update is announced once).
pub fn announcements(
    current: Option<&CatalogSourceStatus>,
    desired: &CatalogSourceStatus,
) -> Vec<Announcement> {
    let mut out = Vec::new();
    for new in &desired.conditions {
        if !OWN_CONDITIONS.contains(&new.type_.as_str()) {
            continue;
        }
        let old = current.and_then(|s| s.conditions.iter().find(|c| c.type_ == new.type_));
        let changed = old.is_none_or(|o| {
            o.status != new.status || o.reason != new.reason || o.message != new.message
        });
        if !changed {
            continue;
        }
        let ok = ConditionStatus::True.is(&new.status);
        let reason = match (new.type_.as_str(), ok) {
            (CONDITION_CATALOG_LOADED, true)
                if old.is_some_and(|o| ConditionStatus::True.is(&o.status)) =>
            {
                CatalogSourceReason::CatalogUpdated.as_str().to_string()
            }
            (CONDITION_CATALOG_LOADED, true) => {
                CatalogSourceReason::CatalogLoaded.as_str().to_string()
            }
            _ => new.reason.clone(),
        };
        out.push(Announcement {
            warning: !ok,
            reason,
            note: new.message.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn summary(digest: &str) -> ContentSummary {
        ContentSummary {
            packages: 3,
            bundles: 9,
            digest: digest.into(),
        }
    }

    fn ready(content: Content, now: i64) -> Observation {
        Observation {
            connection: Connection::Ready {
                address: Some("127.0.0.1:50051".into()),
                message: "registry server at 127.0.0.1:50051 is serving".into(),
            },
            content,
            config_map: None,
            spec_problem: None,
            generation: Some(1),
            image_pulled_at: None,
            registry_service: None,
            template: None,
            now: at(now),
        }
    }

    fn failed(content: Content, now: i64) -> Observation {
        Observation {
            connection: Connection::Failed {
                address: Some("127.0.0.1:50051".into()),
                reason: CatalogSourceReason::ConnectionFailed,
                message: "registry server at 127.0.0.1:50051: connection refused".into(),
            },
            content,
            config_map: None,
            spec_problem: None,
            generation: Some(1),
            image_pulled_at: None,
            registry_service: None,
            template: None,
            now: at(now),
        }
    }

    fn cond<'a>(status: &'a CatalogSourceStatus, type_: &str) -> &'a Condition {
        status.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn a_steady_state_yields_the_same_status_and_no_events() {
        let first = desired_status(None, &ready(Content::Loaded(summary("abc")), 100));
        assert_eq!(
            first.connection_state.as_ref().unwrap().last_observed_state,
            "READY"
        );
        assert_eq!(cond(&first, CONDITION_CATALOG_LOADED).status, "True");
        assert_eq!(first.reason, None);
        let events = announcements(None, &first);
        assert_eq!(
            events.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(),
            ["Connected", "CatalogLoaded"]
        );

        // Polls later with the same content: equal status, so nothing is written or announced.
        let later = desired_status(Some(&first), &ready(Content::Loaded(summary("abc")), 500));
        assert_eq!(later, first);
        assert!(announcements(Some(&first), &later).is_empty());
    }

    #[test]
    fn losing_the_server_keeps_the_content_and_records_the_transition() {
        let up = desired_status(None, &ready(Content::Loaded(summary("abc")), 100));
        let down = desired_status(Some(&up), &failed(Content::Loaded(summary("abc")), 200));
        let state = down.connection_state.as_ref().unwrap();
        assert_eq!(state.last_observed_state, "TRANSIENT_FAILURE");
        assert_eq!(state.last_connect, Some(Time(at(200))));
        let connected = cond(&down, CONDITION_CONNECTED);
        assert_eq!(
            (connected.status.as_str(), connected.reason.as_str()),
            ("False", "ConnectionFailed")
        );
        assert_eq!(connected.last_transition_time, Time(at(200)));
        // The snapshot is still in use.
        assert_eq!(cond(&down, CONDITION_CATALOG_LOADED).status, "True");
        assert_eq!(
            cond(&down, CONDITION_CATALOG_LOADED).last_transition_time,
            Time(at(100))
        );
        assert_eq!(down.reason.as_deref(), Some("ConnectionFailed"));
        let events = announcements(Some(&up), &down);
        assert_eq!(events.len(), 1);
        assert!(events[0].warning);
        assert_eq!(events[0].reason, "ConnectionFailed");

        let back = desired_status(Some(&down), &ready(Content::Loaded(summary("abc")), 300));
        assert_eq!(
            back.connection_state.as_ref().unwrap().last_observed_state,
            "READY"
        );
        assert_eq!(back.reason, None);
        assert_eq!(announcements(Some(&down), &back)[0].reason, "Connected");
    }

    #[test]
    fn new_content_is_announced_once_as_an_update() {
        let v1 = desired_status(None, &ready(Content::Loaded(summary("aaaa")), 100));
        let v2 = desired_status(Some(&v1), &ready(Content::Loaded(summary("bbbb")), 200));
        let events = announcements(Some(&v1), &v2);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, "CatalogUpdated");
        assert!(events[0].note.contains("bbbb"), "{}", events[0].note);
        // A reload moves lastConnect (upstream's clients wait for it); the same content later
        // does not.
        let connect = |s: &CatalogSourceStatus| s.connection_state.clone().unwrap().last_connect;
        assert_eq!(connect(&v1), Some(Time(at(100))));
        assert_eq!(connect(&v2), Some(Time(at(200))));
        let v3 = desired_status(Some(&v2), &ready(Content::Loaded(summary("bbbb")), 300));
        assert_eq!(connect(&v3), Some(Time(at(200))));
    }

    #[test]
    fn last_connect_moves_past_the_config_map_update_once_its_second_has_passed() {
        let mut status = desired_status(None, &ready(Content::Loaded(summary("aaaa")), 100));
        let update_at = |status: &mut CatalogSourceStatus, t: Timestamp| {
            status.config_map_reference = Some(ConfigMapResourceReference {
                name: "cm".into(),
                last_update_time: Some(Time(t)),
                ..Default::default()
            });
        };
        let connect = |s: &CatalogSourceStatus| s.connection_state.clone().unwrap().last_connect;
        // Loaded in the second of the update: wait for the next second, nothing written yet.
        let loaded_at = Timestamp::from_millisecond(100_400).unwrap();
        update_at(&mut status, at(100));
        let wait = connect_after_update(&mut status, loaded_at).unwrap();
        assert!(wait >= std::time::Duration::from_millis(600), "{wait:?}");
        assert!(wait < std::time::Duration::from_millis(700), "{wait:?}");
        assert_eq!(connect(&status), Some(Time(at(100))));
        // The next second: lastConnect is after the update as whole seconds.
        assert_eq!(connect_after_update(&mut status, at(101)), None);
        assert_eq!(connect(&status), Some(Time(at(101))));
        // Already after: left alone.
        assert_eq!(connect_after_update(&mut status, at(150)), None);
        assert_eq!(connect(&status), Some(Time(at(101))));
        // Not READY: nothing to promise.
        status
            .connection_state
            .as_mut()
            .unwrap()
            .last_observed_state = "CONNECTING".into();
        update_at(&mut status, at(160));
        assert_eq!(connect_after_update(&mut status, at(170)), None);
        assert_eq!(connect(&status), Some(Time(at(101))));
    }

    #[test]
    fn refused_content_with_nothing_loaded_is_never_ready() {
        let refused = Content::Failed {
            reason: CatalogSourceReason::InvalidCatalog,
            message: "duplicate package".into(),
            last_good: None,
        };
        let status = desired_status(None, &ready(refused, 100));
        let state = status.connection_state.unwrap();
        assert_eq!(state.last_observed_state, "TRANSIENT_FAILURE");
    }

    #[test]
    fn invalid_content_says_so_and_names_the_snapshot_still_in_use() {
        let v1 = desired_status(None, &ready(Content::Loaded(summary("aaaa")), 100));
        let broken = Content::Failed {
            reason: CatalogSourceReason::InvalidCatalog,
            message: "package \"x\": invalid default channel".into(),
            last_good: Some(summary("aaaa")),
        };
        let v2 = desired_status(Some(&v1), &ready(broken, 200));
        let loaded = cond(&v2, CONDITION_CATALOG_LOADED);
        assert_eq!(
            (loaded.status.as_str(), loaded.reason.as_str()),
            ("False", "InvalidCatalog")
        );
        assert!(
            loaded.message.contains("invalid default channel"),
            "{}",
            loaded.message
        );
        assert!(
            loaded.message.contains("still using the last good content"),
            "{}",
            loaded.message
        );
        assert_eq!(v2.reason.as_deref(), Some("InvalidCatalog"));
        let events = announcements(Some(&v1), &v2);
        assert_eq!(events.len(), 1);
        assert!(events[0].warning);
    }

    #[test]
    fn an_unusable_spec_reports_no_connection_state() {
        let observed = Observation {
            connection: Connection::InvalidSpec {
                message: "spec.address is required for sourceType grpc".into(),
            },
            content: Content::NotLoaded,
            config_map: None,
            spec_problem: None,
            generation: Some(2),
            now: at(100),
            image_pulled_at: None,
            registry_service: None,
            template: None,
        };
        let status = desired_status(None, &observed);
        assert!(status.connection_state.is_none());
        assert_eq!(status.reason.as_deref(), Some("SpecInvalidError"));
        assert_eq!(cond(&status, CONDITION_CATALOG_LOADED).reason, "NotLoaded");
        assert_eq!(
            cond(&status, CONDITION_CONNECTED).observed_generation,
            Some(2)
        );
    }

    /// `olm.catalogImageTemplate`: upstream's two conditions while the annotation is there
    /// (True with the image, or False with why), none once it is gone.
    #[test]
    fn a_catalog_image_template_shows_as_upstreams_two_conditions() {
        use crate::controllers::catalogsource::template::{
            CONDITION_RESOLVED_IMAGE, CONDITION_TEMPLATES_RESOLVED, Resolution,
        };
        let mut observed = ready(Content::Loaded(summary("abc")), 100);
        observed.template = Some(Resolution::Image("quay.io/o/c:1.37.1".into()));
        let resolved = desired_status(None, &observed);
        let templates = cond(&resolved, CONDITION_TEMPLATES_RESOLVED);
        assert_eq!(
            (templates.status.as_str(), templates.reason.as_str()),
            ("True", "AllTemplatesResolved")
        );
        let image = cond(&resolved, CONDITION_RESOLVED_IMAGE);
        assert_eq!(
            (image.status.as_str(), image.message.as_str()),
            ("True", "quay.io/o/c:1.37.1")
        );
        // A template problem is not the catalog's: the catalog stays READY.
        observed.template = Some(Resolution::Unresolved {
            processed: "quay.io/o/c:{x}".into(),
            message: "cannot construct catalog image reference, because one or more template(s) has improper syntax".into(),
        });
        let unresolved = desired_status(Some(&resolved), &observed);
        assert_eq!(
            cond(&unresolved, CONDITION_TEMPLATES_RESOLVED).reason,
            "UnableToResolve"
        );
        assert_eq!(cond(&unresolved, CONDITION_RESOLVED_IMAGE).status, "False");
        assert_eq!(unresolved.reason, None);
        observed.template = None;
        let removed = desired_status(Some(&unresolved), &observed);
        assert!(
            removed
                .conditions
                .iter()
                .all(|c| c.type_ != CONDITION_TEMPLATES_RESOLVED
                    && c.type_ != CONDITION_RESOLVED_IMAGE),
            "{removed:?}"
        );
    }

    #[test]
    fn conditions_of_other_writers_are_kept() {
        let mut current = desired_status(None, &ready(Content::Loaded(summary("a")), 1));
        current.conditions.push(Condition {
            type_: "Custom".into(),
            status: "True".into(),
            reason: "Mine".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(at(1)),
        });
        let next = desired_status(Some(&current), &ready(Content::Loaded(summary("a")), 2));
        assert!(next.conditions.iter().any(|c| c.type_ == "Custom"));
        assert_eq!(next, current);
    }

    #[test]
    fn owned_fields_never_carry_another_writers_conditions() {
        let mut current = desired_status(None, &ready(Content::Loaded(summary("a")), 1));
        current.conditions.push(Condition {
            type_: "Custom".into(),
            status: "True".into(),
            reason: "Mine".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(at(1)),
        });
        let applied = owned_fields(&current);
        let types: Vec<&str> = applied
            .conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, [CONDITION_CONNECTED, CONDITION_CATALOG_LOADED]);
        assert_eq!(applied.connection_state, current.connection_state);
    }

    #[test]
    fn a_bad_poll_interval_is_named_until_it_is_fixed() {
        let mut observed = ready(Content::Loaded(summary("a")), 1);
        observed.spec_problem = Some(
            "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of \
             15m0s instead. Error: \"99999999999999999999h\" is longer than the maximum of 8760h0m0s"
                .into(),
        );
        let bad = desired_status(None, &observed);
        let condition = cond(&bad, CONDITION_SPEC_VALID);
        assert_eq!(condition.status, "False");
        assert_eq!(condition.reason, "InvalidIntervalError");
        assert!(condition.message.contains("99999999999999999999h"));
        assert_eq!(bad.reason.as_deref(), Some("InvalidIntervalError"));
        let events = announcements(None, &bad);
        assert!(
            events
                .iter()
                .any(|e| e.warning && e.reason == "InvalidIntervalError")
        );

        // Named before the source's own state, as upstream does...
        let mut unreachable = observed;
        unreachable.connection = Connection::Failed {
            address: None,
            reason: CatalogSourceReason::ConnectionFailed,
            message: "dial tcp: connection refused".into(),
        };
        let status = desired_status(Some(&bad), &unreachable);
        assert_eq!(status.reason.as_deref(), Some("InvalidIntervalError"));
        assert!(
            status
                .message
                .as_deref()
                .unwrap()
                .contains("Using the default value")
        );
        assert_eq!(cond(&status, CONDITION_CONNECTED).status, "False");
        // ...but after a spec that cannot work at all.
        unreachable.connection = Connection::InvalidSpec {
            message: "unknown sourcetype: ftp".into(),
        };
        let status = desired_status(Some(&bad), &unreachable);
        assert_ne!(status.reason.as_deref(), Some("InvalidIntervalError"));

        let fixed = desired_status(Some(&bad), &ready(Content::Loaded(summary("a")), 2));
        assert!(
            fixed
                .conditions
                .iter()
                .all(|c| c.type_ != CONDITION_SPEC_VALID)
        );
        assert_eq!(fixed.reason, None);
    }

    #[test]
    fn a_panic_is_reported_and_the_next_good_round_clears_it() {
        let good = desired_status(None, &ready(Content::Loaded(summary("a")), 1));
        let panicked = panicked_status(
            Some(&good),
            "panicked at x.rs:1:1: boom".into(),
            Some(1),
            at(2),
        );
        assert_eq!(cond(&panicked, CONDITION_RECONCILED).status, "False");
        assert_eq!(panicked.reason.as_deref(), Some("Panicked"));
        assert_eq!(panicked.connection_state, good.connection_state);
        let healed = desired_status(Some(&panicked), &ready(Content::Loaded(summary("a")), 3));
        assert!(
            healed
                .conditions
                .iter()
                .all(|c| c.type_ != CONDITION_RECONCILED)
        );
        assert_eq!(healed, good);
    }

    #[test]
    fn the_registry_service_names_what_serves_the_catalog_and_keeps_its_creation_time() {
        let grpc = registry_service("ops", "ns", Some("registry.example:50051"));
        assert_eq!(
            (
                grpc.protocol.as_deref(),
                grpc.service_name.as_deref(),
                grpc.port.as_deref()
            ),
            (Some("grpc"), Some("registry.example"), Some("50051"))
        );
        let local = registry_service("cm", "ns", None);
        assert_eq!(
            (
                local.protocol.as_deref(),
                local.service_name.as_deref(),
                local.port
            ),
            (Some("in-process"), Some("cm"), None)
        );
        let mut observed = ready(Content::NotLoaded, 100);
        observed.registry_service = Some(grpc);
        let first = desired_status(None, &observed);
        let created = first.registry_service.as_ref().unwrap().created_at.clone();
        assert!(created.is_some());
        observed.now = Timestamp::from_second(200).unwrap();
        let again = desired_status(Some(&first), &observed);
        assert_eq!(again.registry_service.as_ref().unwrap().created_at, created);
        observed.registry_service = Some(registry_service("ops", "ns", Some("elsewhere:1")));
        let moved = desired_status(Some(&again), &observed);
        assert_ne!(moved.registry_service.unwrap().created_at, created);
    }
}
