//! What the requirements check finds on the cluster: CRDs (read once per change), native
//! APIs, the server version, required APIServices and the accounts' rules.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;

use crate::controllers::kit::ConditionStatus;

use super::context::{Error, Round};
use super::phase;
use super::requirements::{self, CrdReadAt};

/// One CRD as the requirements see it: from the cache of GETs while it still holds
/// ([`CrdReadAt::still_holds`]), else read again (None: absent).
pub(super) async fn crd_state(
    round: &Round<'_>,
    crds: &Api<CustomResourceDefinition>,
    name: &str,
) -> Result<Option<requirements::CrdState>, Error> {
    let watched = round
        .ctx
        .crd_meta
        .get(&ObjectRef::new(name))
        .map(|m| CrdReadAt::of(&m.metadata));
    let states = || {
        round
            .ctx
            .crd_states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(now) = &watched
        && let Some((read_at, state)) = states().get(name)
        && read_at.still_holds(state, now)
    {
        return Ok(Some(state.clone()));
    }
    let Some(crd) = crds.get_opt(name).await.map_err(round.fail("read_crd"))? else {
        states().remove(name);
        return Ok(None);
    };
    let conditions = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let is_true = |t: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == t && ConditionStatus::True.is(&c.status))
    };
    let state = requirements::CrdState {
        uid: crd.metadata.uid.clone().unwrap_or_default(),
        established: is_true("Established"),
        names_accepted: is_true("NamesAccepted"),
        served_versions: crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect(),
    };
    if crd.metadata.resource_version.is_some() {
        states().insert(
            name.to_string(),
            (CrdReadAt::of(&crd.metadata), state.clone()),
        );
    }
    Ok(Some(state))
}

pub(super) async fn gather_requirements(round: &Round<'_>) -> Result<requirements::Found, Error> {
    let csv = round.csv;
    let mut found = requirements::Found::default();
    found_crds(round, &mut found).await?;
    found.native = native_apis(round).await;
    if csv.spec.min_kube_version.is_some() {
        let version = round
            .ctx
            .server_version
            .get_or_try_init(|| async {
                let info = round.client().apiserver_version().await;
                info.map(|info| info.git_version)
            })
            .await
            .map_err(round.fail("read_server_version"))?;
        found.server_version = Some(version.clone());
    }
    found.required_api_services = required_api_services(round).await?;
    found.service_accounts = accounts(round).await?;
    Ok(found)
}

/// The CRDs the CSV owns and requires, and the CSVs that will provide the required ones.
async fn found_crds(round: &Round<'_>, found: &mut requirements::Found) -> Result<(), Error> {
    let csv = round.csv;
    let crds: Api<CustomResourceDefinition> = Api::all(round.client());
    let descriptions = csv
        .spec
        .customresourcedefinitions
        .clone()
        .unwrap_or_default();
    for (list, out) in [
        (&descriptions.owned, &mut found.owned),
        (&descriptions.required, &mut found.required),
    ] {
        for description in list {
            out.push(crd_state(round, &crds, &description.name).await?);
        }
    }
    if !descriptions.required.is_empty() && phase::never_installed(csv.status.as_ref()) {
        let state = round.ctx.csvs.state();
        let others = state
            .iter()
            .filter_map(|g| g.0.as_ref().ok())
            .filter(|other| {
                other.metadata.namespace.as_deref() == Some(round.namespace.as_str())
                    && other.metadata.name.as_deref() != Some(round.name.as_str())
            });
        found.providers_pending = requirements::providers_pending(csv, others);
    }
    Ok(())
}

/// Whether each of the CSV's native APIs is served (discovery; a failure reads as not).
async fn native_apis(round: &Round<'_>) -> Vec<bool> {
    let mut served = Vec::new();
    for gvk in &round.csv.spec.native_apis {
        let resources = if gvk.group.is_empty() {
            round.client().list_core_api_resources(&gvk.version).await
        } else {
            let group_version = format!("{}/{}", gvk.group, gvk.version);
            round
                .client()
                .list_api_group_resources(&group_version)
                .await
        };
        let found = resources.map(|list| list.resources.iter().any(|r| r.kind == gvk.kind));
        served.push(found.unwrap_or(false));
    }
    served
}

/// The UID of each required APIService that is Available (None: absent or not Available).
async fn required_api_services(round: &Round<'_>) -> Result<Vec<Option<String>>, Error> {
    let definitions = round.csv.spec.apiservicedefinitions.as_ref();
    let required = definitions.map(|d| d.required.clone()).unwrap_or_default();
    let api: Api<APIService> = Api::all(round.client());
    let mut found = Vec::new();
    for description in required {
        let name = format!("{}.{}", description.version, description.group);
        let service = api
            .get_opt(&name)
            .await
            .map_err(round.fail("read_api_service"))?;
        found.push(service.and_then(|a| {
            let conditions = a.status.as_ref().and_then(|s| s.conditions.as_ref());
            let available = conditions.is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Available" && c.status == "True")
            });
            available.then(|| a.metadata.uid.clone().unwrap_or_default())
        }));
    }
    Ok(found)
}

/// Each account the strategy names: whether it exists and which of its rules it holds.
async fn accounts(round: &Round<'_>) -> Result<Vec<requirements::AccountFound>, Error> {
    let strategy = round.csv.spec.install.spec.clone().unwrap_or_default();
    let mut accounts: Vec<String> = strategy
        .permissions
        .iter()
        .chain(&strategy.cluster_permissions)
        .map(|p| p.service_account_name.clone())
        .collect();
    accounts.sort();
    accounts.dedup();
    let stores = &round.ctx.rbac;
    let (roles, role_bindings) = (stores.roles.state(), stores.role_bindings.state());
    let cluster_roles = stores.cluster_roles.state();
    let cluster_role_bindings = stores.cluster_role_bindings.state();
    let view = crate::controllers::authz::RbacView {
        roles: &roles,
        role_bindings: &role_bindings,
        cluster_roles: &cluster_roles,
        cluster_role_bindings: &cluster_role_bindings,
    };
    let mut found = Vec::new();
    for sa in accounts {
        let exists = account_exists(round, &sa).await?;
        found.push(account_found(
            &view,
            &strategy,
            &round.namespace,
            sa,
            exists,
        ));
    }
    Ok(found)
}

/// Whether the account `sa` exists: `default` always does; the ones OLM made are in the
/// shared cache; others are asked of the API server.
async fn account_exists(round: &Round<'_>, sa: &str) -> Result<bool, Error> {
    let cached = round
        .ctx
        .service_accounts
        .get(&ObjectRef::new(sa).within(&round.namespace));
    if sa == "default" || cached.is_some() {
        return Ok(true);
    }
    let api: Api<ServiceAccount> = Api::namespaced(round.client(), &round.namespace);
    let found = api.get_metadata_opt(sa).await;
    Ok(found.map_err(round.fail("read_service_account"))?.is_some())
}

/// Which of the rules `strategy` declares for `sa` the account holds: namespaced rules in
/// the CSV's `namespace`, cluster rules cluster-wide (upstream's `permissionStatus`).
pub(super) fn account_found(
    view: &crate::controllers::authz::RbacView<'_>,
    strategy: &crate::api::StrategyDetailsDeployment,
    namespace: &str,
    sa: String,
    exists: bool,
) -> requirements::AccountFound {
    use crate::controllers::authz::{Account, Grants};
    let account = Account {
        namespace,
        name: &sa,
    };
    let held = |scope: Option<&str>, list: &[crate::api::StrategyDeploymentPermissions]| {
        let grants = Grants::of(view, account, scope);
        requirements::rules_of(list, &sa)
            .map(|rule| grants.allows(rule))
            .collect::<Vec<bool>>()
    };
    let namespaced = held(Some(namespace), &strategy.permissions);
    let cluster = held(None, &strategy.cluster_permissions);
    requirements::AccountFound {
        name: sa.clone(),
        exists,
        namespaced,
        cluster,
    }
}
