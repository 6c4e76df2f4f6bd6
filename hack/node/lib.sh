# Shared settings for hack/node scripts (one real node beside kwok's fake ones). Sourced.
# Builds on hack/cluster/lib.sh: same cache root, cluster dir and API server port.
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../cluster" && pwd)/lib.sh"

HACK_NODE_DIR="$REPO_ROOT/hack/node"
CONTAINERD_VERSION=v2.4.2    # containerd 2.x: kubelets after 1.35 need it (see hack/node/up)
# kubelet and kube-proxy come from their own wrapper module (hack/node/tools), with the same
# replaces and the same module versions as hack/cluster/tools, so the control plane's cache key
# does not change and the Go build cache already holds most of their packages.
NODE_TOOLS_KEY="$(cat "$HACK_NODE_DIR/tools/go.mod" "$HACK_NODE_DIR/tools/go.sum" | sha256sum | cut -c1-12)"
NODE_BIN_DIR="$CACHE_ROOT/node-k8s-$K8S_VERSION-$NODE_TOOLS_KEY/bin"
CONTAINERD_BIN_DIR="$CACHE_ROOT/containerd-$CONTAINERD_VERSION/bin"

# Runtime state of the node, under the cluster dir so `hack/cluster/down --clean` removes it.
NODE_DIR="$CLUSTER_DIR/node"
NODE_NAME="${OLM_NODE_NAME:-real-node-0}"
# Network namespaces are global names; derive them from the cluster dir so two clusters
# (tests, benches) never share one.
NODE_ID="$(printf '%s' "$CLUSTER_DIR" | sha256sum | cut -c1-6)"
NODE_NETNS="olm-node-$NODE_ID"
# The veth pair linking the host namespace and the node's: a /30 per cluster dir.
NODE_VETH_HOST="olmh-$NODE_ID"
NODE_VETH_NODE="olmn-$NODE_ID"
NODE_SUBNET_OCTET="$(( 16#${NODE_ID:0:2} ))"
NODE_HOST_IP="${OLM_NODE_HOST_IP:-172.31.$NODE_SUBNET_OCTET.1}"
NODE_IP="${OLM_NODE_IP:-172.31.$NODE_SUBNET_OCTET.2}"
# Per cluster dir too: the host routes it into this node's namespace (API server -> pods).
POD_CIDR="${OLM_NODE_POD_CIDR:-10.88.$NODE_SUBNET_OCTET.0/24}"
# The node-local registry port: the node reaches the registry at $NODE_HOST_IP:$REGISTRY_PORT.
REGISTRY_PORT="${OLM_NODE_REGISTRY_PORT:-$((APISERVER_PORT + 10))}"

# The cgroup parent every pod and container of this node lives under (cgroup v1: one per
# controller hierarchy). The kubelet makes kubepods under it.
NODE_CGROUP="olm-node-$NODE_ID"

nlog() { printf '[node %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
