# Shared settings for hack/cluster scripts. Sourced, not run.
# Versions are pinned here; binaries are cached outside the repo keyed by them.
set -euo pipefail

K8S_VERSION=v1.37.1          # must match tools/go.mod and the k8s-openapi feature (v1_37)
ETCD_VERSION=v3.7.0          # what k8s.io/apiserver v0.37.1 requires
KWOK_VERSION=v0.8.0

HACK_CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HACK_CLUSTER_DIR/../.." && pwd)"
CACHE_ROOT="${OLM_RS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olm-rs}"
# The key covers the pinned versions and the exact module graph.
TOOLS_KEY="$(cat "$HACK_CLUSTER_DIR/tools/go.mod" "$HACK_CLUSTER_DIR/tools/go.sum" | sha256sum | cut -c1-12)"
K8S_BIN_DIR="$CACHE_ROOT/k8s-$K8S_VERSION-$TOOLS_KEY/bin"
KWOK_BIN_DIR="$CACHE_ROOT/kwok-$KWOK_VERSION/bin"
# Runtime state of the running cluster (pids, logs, certs, etcd data, kubeconfig).
CLUSTER_DIR="${OLM_CLUSTER_DIR:-$REPO_ROOT/target/cluster}"
# The Service range, per cluster dir: a real node routes it from the host into its network
# namespace (the API server calling webhooks and APIServices through ClusterIPs), so two
# clusters with real nodes (tests, a helper's worktree) must not share one.
SERVICE_CIDR="${OLM_SERVICE_CIDR:-10.$(( 96 + 16#$(printf '%s' "$CLUSTER_DIR" | sha256sum | cut -c1-2) % 64 )).0.0/16}"
SERVICE_IP="${SERVICE_CIDR%.0.0/16}.0.1"   # the kubernetes Service's ClusterIP

export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:-} -mod=mod"
export CGO_ENABLED=0

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Loopback ports; override when they clash with something on the machine.
ETCD_CLIENT_PORT="${OLM_ETCD_CLIENT_PORT:-23790}"
ETCD_PEER_PORT="${OLM_ETCD_PEER_PORT:-23800}"
APISERVER_PORT="${OLM_APISERVER_PORT:-26443}"
KUBECONFIG_FILE="$CLUSTER_DIR/kubeconfig"
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

pid_of() { cat "$CLUSTER_DIR/pids/$1.pid" 2>/dev/null || true; }
is_running() { local pid; pid="$(pid_of "$1")"; [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; }
