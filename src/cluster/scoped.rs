//! Clients acting as an OperatorGroup's `spec.serviceAccountName` (upstream's scoped
//! installs): whatever an install makes on the group's behalf is made with that account's
//! rights, so an admin who scopes a group limits what its operators may be granted. Shared
//! by the InstallPlan controller (plan steps) and the CSV controller (the CSV's RBAC); each
//! keeps its own cache of clients.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;

use crate::api::OperatorGroup;

/// One client per impersonated account, built once.
#[derive(Default)]
pub struct ScopedClients {
    clients: Mutex<HashMap<String, Client>>,
}

/// The account a group's installs act as, when it names one.
pub fn service_account(group: &OperatorGroup) -> Option<&str> {
    group
        .spec
        .service_account_name
        .as_deref()
        .filter(|s| !s.is_empty())
}

/// No client could be built for the account.
#[derive(Debug, thiserror::Error)]
pub enum ScopedError {
    #[error("building a client for {user}: {source}")]
    Config {
        user: String,
        #[source]
        source: kube::config::InferConfigError,
    },
    #[error("building a client for {user}: {source}")]
    Client {
        user: String,
        #[source]
        source: kube::Error,
    },
}

impl ScopedClients {
    /// A client that acts as `namespace`/`account` (its user and groups, as the API server
    /// sees the account's own token). `Err` says why none could be built.
    pub async fn acting_as(&self, namespace: &str, account: &str) -> Result<Client, ScopedError> {
        let user = format!("system:serviceaccount:{namespace}:{account}");
        if let Some(client) = self.cached(&user) {
            return Ok(client);
        }
        let mut config = match kube::Config::infer().await {
            Ok(config) => config,
            Err(source) => return Err(ScopedError::Config { user, source }),
        };
        // The API server adds the account's groups itself (`system:serviceaccounts`, its
        // namespace's, `system:authenticated`), so OLM needs `impersonate` on
        // serviceaccounts alone, never on groups (which would reach `system:masters`).
        config.auth_info.impersonate = Some(user.clone());
        let client = match crate::cluster::warnings::client(config) {
            Ok(client) => client,
            Err(source) => return Err(ScopedError::Client { user, source }),
        };
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(user, client.clone());
        Ok(client)
    }

    fn cached(&self, user: &str) -> Option<Client> {
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(user)
            .cloned()
    }
}
