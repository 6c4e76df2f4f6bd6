#!/usr/bin/env python3
"""Benchmark: upgrade previews and rollbacks. Part 1 (`edges`): each upgrade edge of a community
catalog is installed at its older version, its upgrade plan's preview (InstallPlan
`status.impact`) read before approval, the cluster snapshotted before and after the upgrade,
and what changed compared with what the preview said; every difference is printed. Part 2
(`rollbacks`): toy packages 1.0.0 → 2.0.0, safe and unsafe to roll back by construction, rolled
back with `spec.upgradePolicy.rollbackTo` and checked accepted or refused as they should be.
Ours only, on a control plane of its own (`upgrades` in common.CLUSTERS). Method:
hack/bench/README.md.

CATALOG_REPO is a checkout of community-operators-prod (operators/<package>/<version>/), by
default the testdata in ../shared/testdata/community-operators.

Usage: hack/bench/upgrades.py [CATALOG_REPO] [--parts edges,rollbacks] [--packages a,b] [--limit N]
           [--edges default|all-heads] [--installs-from F] [--prefer-mode all|own] [--budget S]
           [--olm PATH] [--nodes 3] [--workdir DIR] [--keep-logs] [--json] [--json-file F]
       hack/bench/upgrades.py --from-json F        (the report of saved results)
       hack/bench/upgrades.py --diff-saved DIR     (compare again an edge's saved plan and snapshots)
       hack/bench/upgrades.py --self-check         (the pure parts against small cases)
       (needs `cargo build --release --bin olm`, or target/debug/olm; go for the monitoring CRDs
        unless cached; the control plane is started and removed here)
"""
import argparse, base64, hashlib, importlib.util, json, os, re, shutil, subprocess, sys, tempfile, time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import (  # noqa: E402
    REPO, SHARED, Api, BenchError, Cluster, Processes, free_port, ignore_signals, interrupt_on_signals, log,
    wait_port, wait_ready,
)

_spec = importlib.util.spec_from_file_location("install_catalog", HERE / "install-catalog.py")
ic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ic)  # render_one, read_stream, monitoring_crds, short, tail_error

GLOBAL_NS = "olm"
CATALOG = "bench"
DEFAULT_REPO = SHARED / "testdata/community-operators"
OPS = "operators.coreos.com"
MODES = ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")
short = ic.short


# ---------------------------------------------------------------------------- versions


def parse_version(text):
    """A semver as a sortable tuple (release above its pre-releases); None when not one."""
    m = re.match(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$", (text or "").strip())
    if not m:
        return None
    pre = m.group(4)
    pre_key = (1,) if pre is None else (0, *((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")))
    return (int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0), pre_key)


def in_range(version, expr):
    """Whether a version is in a range as `olm.skipRange` writes it (blang/semver: `||` of
    space-separated comparators >=, >, <=, <, =, !=)."""
    v = parse_version(version)
    if v is None or not expr:
        return False
    for alternative in expr.split("||"):
        ok = True
        for comp in alternative.split():
            m = re.match(r"^(>=|<=|>|<|=|==|!=)?\s*(.+)$", comp)
            if not m:
                ok = False
                break
            op, bound = m.group(1) or "=", parse_version(m.group(2))
            if bound is None:
                ok = False
                break
            ok = {">=": v >= bound, "<=": v <= bound, ">": v > bound, "<": v < bound, "=": v == bound,
                  "==": v == bound, "!=": v != bound}[op]
            if not ok:
                break
        if ok and alternative.split():
            return True
    return False


# ---------------------------------------------------------------------------- edges


def bundle_info(bundle):
    """(version, supported install modes) of an FBC bundle."""
    version, modes = None, None
    for prop in bundle.get("properties") or []:
        value = prop.get("value") or {}
        if prop.get("type") == "olm.package":
            version = value.get("version")
        elif prop.get("type") == "olm.csv.metadata" and modes is None:
            modes = value.get("installModes")
        elif prop.get("type") == "olm.bundle.object" and modes is None:
            try:
                obj = json.loads(base64.b64decode(value.get("data", "")))
            except ValueError:
                continue
            if obj.get("kind") == "ClusterServiceVersion":
                modes = (obj.get("spec") or {}).get("installModes") or []
    return version, [m.get("type") for m in modes or [] if m.get("supported")]


def package_edges(docs, which="default"):
    """The upgrade edges of one package's FBC: per channel (the default one, or every channel
    with which="all-heads"), its head and the entry the head upgrades from: the one it
    `replaces` when that is in the channel, else the newest of its `skips` in the channel, else
    the newest entry in its `skipRange` (with a single head, only reached when its skips name
    no version). Returns (edges, skipped: [(channel, why)])."""
    pkg = next((d for d in docs if d.get("schema") == "olm.package"), None)
    if pkg is None:
        return [], [("", "no olm.package")]
    bundles = {d["name"]: d for d in docs if d.get("schema") == "olm.bundle"}
    channels = {d["name"]: d for d in docs if d.get("schema") == "olm.channel"}
    names = [pkg.get("defaultChannel")] if which == "default" else sorted(channels)
    if which != "default" and pkg.get("defaultChannel") in names:  # the default channel first
        names.remove(pkg["defaultChannel"])
        names.insert(0, pkg["defaultChannel"])
    edges, skipped, seen = [], [], set()
    for ch in names:
        if ch not in channels:
            skipped.append((ch or "", "the default channel is not a channel"))
            continue
        entries = {e["name"]: e for e in channels[ch].get("entries") or []}
        upgraded = set()
        for e in entries.values():
            if e.get("replaces"):
                upgraded.add(e["replaces"])
            upgraded.update(e.get("skips") or [])
        heads = [n for n in entries if n not in upgraded]
        if len(heads) != 1:
            skipped.append((ch, f"{len(heads)} heads: {', '.join(heads[:4])}"))
            continue
        head = entries[heads[0]]
        version = lambda n: parse_version(bundle_info(bundles[n])[0]) if n in bundles else None  # noqa: E731
        src, how = None, None
        if head.get("replaces") in entries:
            src, how = head["replaces"], "replaces"
        else:
            skips = [n for n in head.get("skips") or [] if n in entries and version(n)]
            if skips:
                src, how = max(skips, key=version), "skips"
            elif head.get("skipRange"):
                ranged = [n for n in entries if n != head["name"] and n in bundles
                          and in_range(bundle_info(bundles[n])[0], head["skipRange"])]
                if ranged:
                    src, how = max(ranged, key=lambda n: version(n) or (0,)), "skipRange"
        if src is None:
            skipped.append((ch, f"its head {head['name']} upgrades from no entry of the channel"
                            + (" (one entry)" if len(entries) == 1 else "")))
            continue
        if head["name"] not in bundles or src not in bundles:
            skipped.append((ch, f"no bundle for {head['name'] if head['name'] not in bundles else src}"))
            continue
        if (src, head["name"]) in seen:
            skipped.append((ch, f"the same edge {src} → {head['name']} as an earlier channel"))
            continue
        seen.add((src, head["name"]))
        (v_from, m_from), (v_to, m_to) = bundle_info(bundles[src]), bundle_info(bundles[head["name"]])
        edges.append({"package": pkg["name"], "channel": ch, "default_channel": ch == pkg.get("defaultChannel"),
                      "from": src, "to": head["name"], "from_version": v_from, "to_version": v_to, "how": how,
                      "modes_from": m_from, "modes_to": m_to})
    return edges, skipped


def group_for(edge, ns, prefer="all"):
    """(target namespaces or None for AllNamespaces, mode) of an OperatorGroup both versions of
    the edge support (the older one's alone when they share none)."""
    common_modes = [m for m in edge["modes_from"] if m in edge["modes_to"]] or edge["modes_from"]
    order = ["AllNamespaces", "OwnNamespace", "SingleNamespace", "MultiNamespace"] if prefer == "all" else \
        ["OwnNamespace", "SingleNamespace", "AllNamespaces", "MultiNamespace"]
    for mode in order:
        if mode in common_modes:
            break
    else:
        return None, "AllNamespaces (no install mode supported)"
    return {"AllNamespaces": None, "OwnNamespace": [ns], "SingleNamespace": [f"{ns}-t"],
            "MultiNamespace": [f"{ns}-t1", f"{ns}-t2"]}[mode], mode


def edge_namespace(i, package):
    base = re.sub(r"[^a-z0-9-]", "-", package.lower())
    name = f"u{i:03d}-{base}"[:48].rstrip("-")
    return name


# ---------------------------------------------------------------------------- snapshots

# The kinds every snapshot lists (cluster-wide, every namespace): those the preview speaks of.
# Pods, ReplicaSets, Events, Leases, Endpoints are left out: consequences of a Deployment change
# or bookkeeping, which no preview names. Subscriptions and InstallPlans too (OLM's own records).
BASE_KINDS = [
    (OPS, "v1alpha1", "ClusterServiceVersion"),
    ("apps", "v1", "Deployment"),
    ("", "v1", "ServiceAccount"), ("", "v1", "Service"), ("", "v1", "Secret"), ("", "v1", "ConfigMap"),
    ("rbac.authorization.k8s.io", "v1", "Role"), ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole"), ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
    ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration"),
    ("apiregistration.k8s.io", "v1", "APIService"),
]
SKIP_KINDS = {(OPS, "Subscription"), (OPS, "InstallPlan"), ("", "Pod"), ("apps", "ReplicaSet"), ("", "Event"),
              ("events.k8s.io", "Event"), ("coordination.k8s.io", "Lease"), ("", "Endpoints"),
              ("discovery.k8s.io", "EndpointSlice")}


def group_of(api_version):
    return api_version.rsplit("/", 1)[0] if "/" in (api_version or "") else ""


def obj_key(group, kind, ns, name):
    return f"{group}|{kind}|{ns or ''}|{name}"


def split_key(key):
    group, kind, ns, name = key.split("|", 3)
    return group, kind, ns, name


def show_key(key):
    group, kind, ns, name = split_key(key)
    return f"{(group + '/') if group else ''}{kind} {ns + '/' if ns else ''}{name}"


def digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def content_of(group, kind, obj):
    """What counts as an object's content, compared before and after: its spec, rules, data…;
    never its metadata (labels, annotations, owner references: recorded apart) nor status."""
    if kind == "Secret":  # hashes only: no key material in the results
        return {"type": obj.get("type"), "data": {k: digest(v) for k, v in (obj.get("data") or {}).items()}}
    if kind == "ConfigMap":
        return {"data": obj.get("data") or {}, "binaryData": {k: digest(v) for k, v in (obj.get("binaryData") or {}).items()}}
    if kind == "ServiceAccount":
        return {k: obj[k] for k in ("secrets", "imagePullSecrets", "automountServiceAccountToken") if k in obj}
    if kind in ("Role", "ClusterRole"):
        if obj.get("aggregationRule"):  # its rules are the aggregation's (kube-controller-manager)
            return {"aggregationRule": obj["aggregationRule"]}
        return {"rules": obj.get("rules") or []}
    if kind in ("RoleBinding", "ClusterRoleBinding"):
        return {"roleRef": obj.get("roleRef"), "subjects": obj.get("subjects") or []}
    if kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        return {"webhooks": obj.get("webhooks") or []}
    if "spec" in obj:
        return {"spec": obj["spec"]}
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}


def record_of(group, kind, obj):
    meta = obj.get("metadata") or {}
    rec = {"uid": meta.get("uid"), "rv": meta.get("resourceVersion"), "content": content_of(group, kind, obj),
           "meta": {"labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {},
                    "ownerReferences": meta.get("ownerReferences") or []}}
    if kind == "CustomResourceDefinition":
        rec["storedVersions"] = (obj.get("status") or {}).get("storedVersions") or []
    if kind == "ClusterServiceVersion":
        rec["phase"] = (obj.get("status") or {}).get("phase")
    return rec


class Discovery:
    """(group, version, kind) → (plural, namespaced), from the API server's discovery."""

    def __init__(self, api):
        self.api, self.cache, self.preferred = api, {}, {}

    def resolve(self, group, version, kind):
        gv = f"{group}/{version}" if group else version
        if gv not in self.cache:
            doc = self.api.get("/api/v1" if not group else f"/apis/{gv}") if version else None
            self.cache[gv] = {r["kind"]: (r["name"], r["namespaced"]) for r in (doc or {}).get("resources") or []
                              if "/" not in r["name"]}
        found = self.cache[gv].get(kind)
        if found is None and group:  # another version of the group: its preferred one
            if group not in self.preferred:
                doc = self.api.get(f"/apis/{group}") or {}
                self.preferred[group] = ((doc.get("preferredVersion") or {}).get("version"))
            pv = self.preferred[group]
            if pv and pv != version:
                return self.resolve(group, pv, kind)
        return None if found is None else (gv, *found)


def take_snapshot(api, discovery, kinds):
    """Every object of these kinds, cluster-wide: {key: record}, and the kinds not served."""
    objects, missing = {}, []
    for group, version, kind in kinds:
        found = discovery.resolve(group, version, kind)
        if found is None:
            missing.append(f"{group}/{version}/{kind}")
            continue
        gv, plural, _ = found
        base = f"/api/{gv}" if not group else f"/apis/{gv}"
        listing = api.get(f"{base}/{plural}") or {}
        for item in listing.get("items") or []:
            if kind == "APIService" and not (item.get("spec") or {}).get("service"):
                continue  # local: the API server's own, made for every built-in and CRD group version
            meta = item.get("metadata") or {}
            objects[obj_key(group, kind, meta.get("namespace"), meta["name"])] = record_of(group, kind, item)
    return {"taken": time.time(), "kinds": [list(k) for k in kinds], "missing": missing, "objects": objects}


def snapshot_digest(snap):
    return digest({k: [r["uid"], r["content"], r.get("storedVersions")] for k, r in snap["objects"].items()})


def orphans_of_csvs(snap):
    """Objects whose every ClusterServiceVersion owner is gone (and that have one): what the
    garbage collector has yet to delete."""
    csv_uids = {r["uid"] for k, r in snap["objects"].items() if split_key(k)[1] == "ClusterServiceVersion"}
    out = set()
    for key, rec in snap["objects"].items():
        owners = [o for o in rec["meta"]["ownerReferences"] if o.get("kind") == "ClusterServiceVersion"]
        if owners and len(owners) == len(rec["meta"]["ownerReferences"]) and not any(o.get("uid") in csv_uids for o in owners):
            out.add(key)
    return out


def stable_snapshot(api, discovery, kinds, timeout, quiet, alive=None):
    """A snapshot once two taken at least `quiet` s apart agree (content and uids): OLM has
    stopped changing what the bench compares. Returns (snapshot, settled: bool)."""
    first = take_snapshot(api, discovery, kinds)
    deadline = time.time() + timeout
    while True:
        time.sleep(0.5)
        if alive:
            alive()
        snap = take_snapshot(api, discovery, kinds)
        if snapshot_digest(snap) != snapshot_digest(first):
            first = snap
        elif snap["taken"] - first["taken"] >= quiet:
            return snap, True
        if time.time() > deadline:
            return snap, False


# ---------------------------------------------------------------------------- what changed


def changed_paths(a, b, path="", out=None, limit=6):
    """Where two JSON values differ (at most `limit` paths)."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                changed_paths(a.get(k), b.get(k), f"{path}.{k}" if path else k, out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                changed_paths(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(path or "(whole)")
    return out


def norm_rule(rule):
    """A policy rule as a canonical JSON string: its lists sorted, empty ones dropped."""
    out = {}
    for k in ("apiGroups", "resources", "resourceNames", "verbs", "nonResourceURLs"):
        v = rule.get(k)
        if v:
            out[k] = sorted(set(v))
    return json.dumps(out, sort_keys=True)


def effective_rbac(snap):
    """{ServiceAccount "ns/name": {(scope, rule)}} through the snapshot's bindings: a
    RoleBinding's rules are Namespace scope, a ClusterRoleBinding's Cluster."""
    objs = snap["objects"]
    rules = {}
    for key, rec in objs.items():
        group, kind, ns, name = split_key(key)
        if group != "rbac.authorization.k8s.io" or kind not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = rec["content"].get("roleRef") or {}
        role_key = obj_key("rbac.authorization.k8s.io", ref.get("kind"), ns if ref.get("kind") == "Role" else "",
                           ref.get("name"))
        role = objs.get(role_key)
        if role is None:
            continue
        role_rules = role["content"].get("rules")
        if role_rules is None:  # an aggregated ClusterRole: its rules are kube-controller-manager's
            continue
        # The authentication reader a served Deployment's account gets in kube-system is
        # its own scope (the preview's "Namespace kube-system"), not the namespace's.
        scope = "Cluster" if kind != "RoleBinding" else "Namespace kube-system" if ns == "kube-system" else "Namespace"
        for subject in rec["content"].get("subjects") or []:
            if subject.get("kind") != "ServiceAccount":
                continue
            sa = f"{subject.get('namespace') or ns}/{subject.get('name')}"
            for r in role_rules:
                rules.setdefault(sa, set()).add((scope, norm_rule(r)))
    return rules


def matches(item, pattern):
    return pattern == "*" or item == pattern


def resource_matches(resource, pattern):
    if pattern == "*" or pattern == resource:
        return True
    if pattern.startswith("*/") and "/" in resource:
        return resource.split("/", 1)[1] == pattern[2:]
    if pattern.endswith("/*") and "/" in resource:
        return resource.split("/", 1)[0] == pattern[:-2]
    return False


def rule_covered(rule, held, scope):
    """Whether the rules an account held ({(scope, rule json)}) allowed all of `rule`
    (wildcards as RBAC reads them). A namespaced rule is covered by rules of its own scope or
    Cluster ones, a Cluster one by Cluster rules only."""
    rule = json.loads(norm_rule(rule)) if isinstance(rule, dict) else json.loads(rule)
    candidates = [json.loads(r) for s, r in held if s == scope or s == "Cluster"]
    if rule.get("nonResourceURLs"):
        for url in rule["nonResourceURLs"]:
            for verb in rule.get("verbs") or []:
                if not any(any(matches(verb, v) for v in c.get("verbs") or [])
                           and any(u == url or u == "*" or (u.endswith("*") and url.startswith(u[:-1]))
                                   for u in c.get("nonResourceURLs") or []) for c in candidates):
                    return False
        return True
    for g in rule.get("apiGroups") or []:
        for res in rule.get("resources") or []:
            for verb in rule.get("verbs") or []:
                for rn in rule.get("resourceNames") or [None]:
                    if not any(any(matches(g, x) for x in c.get("apiGroups") or [])
                               and any(resource_matches(res, x) for x in c.get("resources") or [])
                               and any(matches(verb, x) for x in c.get("verbs") or [])
                               and (not c.get("resourceNames") or (rn is not None and rn in c["resourceNames"]))
                               for c in candidates):
                        return False
    return True


def deployment_images(snap):
    """{(namespace, deployment, container): image} of every Deployment (init containers too)."""
    out = {}
    for key, rec in snap["objects"].items():
        group, kind, ns, name = split_key(key)
        if (group, kind) != ("apps", "Deployment"):
            continue
        pod = (((rec["content"].get("spec") or {}).get("template") or {}).get("spec") or {})
        for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
            out[(ns, name, c.get("name"))] = c.get("image")
    return out


def crd_versions(rec):
    return {v["name"]: v for v in ((rec["content"].get("spec") or {}).get("versions") or [])}


def crd_change(before, after):
    """A CRD's change as the preview's `crds[]` entry would state it; None when unchanged."""
    if after is None:
        return None
    new = crd_versions(after)
    if before is None:
        return {"change": "Created", "versionsAdded": sorted(new), "versionsUnserved": [], "versionsRemoved": [],
                "storedVersionsUnserved": [], "schemaChanged": False}
    if before["content"] == after["content"]:
        return None
    old = crd_versions(before)
    served = {n for n, v in new.items() if v.get("served")}
    schema = lambda v: (v.get("schema") or {}).get("openAPIV3Schema")  # noqa: E731
    return {"change": "Updated",
            "versionsAdded": sorted(set(new) - set(old)),
            "versionsUnserved": sorted(n for n in new if n in old and old[n].get("served") and not new[n].get("served")),
            "versionsRemoved": sorted(set(old) - set(new)),
            "storedVersionsUnserved": sorted(v for v in before.get("storedVersions") or [] if v not in served),
            "schemaChanged": any(schema(new[n]) != schema(old[n]) for n in served if n in old)}


def webhook_entries(snap):
    """{(kind, webhook name): (configuration or CRD name, content)}: admission webhooks inside
    their configurations, and CRDs' conversion webhooks."""
    out = {}
    for key, rec in snap["objects"].items():
        group, kind, _, name = split_key(key)
        if kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            hook_kind = kind.replace("WebhookConfiguration", "AdmissionWebhook")
            for hook in rec["content"].get("webhooks") or []:
                out[(hook_kind, hook.get("name"))] = (name, hook)
        elif kind == "CustomResourceDefinition":
            conv = (rec["content"].get("spec") or {}).get("conversion") or {}
            if conv.get("strategy") == "Webhook":
                out[("ConversionWebhook", name)] = (name, conv)
    return out


def actual_changes(before, after):
    """What changed between two snapshots, in the preview's terms."""
    b, a = before["objects"], after["objects"]
    created = sorted(k for k in a if k not in b)
    deleted = sorted(k for k in b if k not in a)
    updated, recreated, meta_only = [], [], []
    for k in sorted(set(a) & set(b)):
        if a[k]["uid"] != b[k]["uid"]:
            recreated.append(k)
        elif a[k]["content"] != b[k]["content"]:
            updated.append({"key": k, "paths": changed_paths(b[k]["content"], a[k]["content"])})
        elif a[k]["meta"] != b[k]["meta"]:
            meta_only.append({"key": k, "fields": [f for f in ("labels", "annotations", "ownerReferences")
                                                    if a[k]["meta"][f] != b[k]["meta"][f]]})
    rb, ra = effective_rbac(before), effective_rbac(after)
    rbac = {}
    for sa in sorted(set(rb) | set(ra)):
        added, removed = ra.get(sa, set()) - rb.get(sa, set()), rb.get(sa, set()) - ra.get(sa, set())
        if added or removed:
            rbac[sa] = {"added": sorted(added), "removed": sorted(removed)}
    ib, ia = deployment_images(before), deployment_images(after)
    images = [{"namespace": ns, "deployment": d, "container": c, "from": ib.get((ns, d, c)), "to": ia.get((ns, d, c))}
              for (ns, d, c) in sorted(set(ib) | set(ia)) if ib.get((ns, d, c)) != ia.get((ns, d, c))]
    crds = {}
    for k in sorted(set(a) | set(b)):
        group, kind, _, name = split_key(k)
        if kind == "CustomResourceDefinition":
            ch = crd_change(b.get(k), a.get(k))
            if ch:
                crds[name] = ch
    wb, wa = webhook_entries(before), webhook_entries(after)
    webhooks = []
    for hk in sorted(set(wb) | set(wa)):
        if hk not in wb:
            change = "Added"
        elif hk not in wa:
            change = "Removed"
        elif wb[hk][1] != wa[hk][1]:
            change = "Changed"
        else:
            continue
        webhooks.append({"kind": hk[0], "name": hk[1], "owner": (wa.get(hk) or wb.get(hk))[0], "change": change})
    api_services = []
    for k in created + deleted + [u["key"] for u in updated] + recreated:
        group, kind, _, name = split_key(k)
        if kind == "APIService":
            api_services.append({"name": name, "change": "Added" if k in created else "Removed" if k in deleted
                                 else "Changed"})
    return {"created": created, "deleted": deleted, "updated": updated, "recreated": recreated,
            "metadata_only": meta_only, "rbac": rbac, "images": images, "crds": crds, "webhooks": webhooks,
            "api_services": sorted(api_services, key=lambda x: x["name"])}


# ---------------------------------------------------------------------------- preview against actual


def preview_ref_key(ref):
    return obj_key(group_of(ref.get("apiVersion", "")), ref.get("kind"), ref.get("namespace"), ref.get("name"))


def compare(impact, actual, before, plan_phase):
    """Every difference between a plan's preview and what the upgrade changed, as lines."""
    diffs = []
    objs = impact.get("objects") or {}
    p_created = {preview_ref_key(r) for r in objs.get("created") or []}
    p_updated = {preview_ref_key(r) for r in objs.get("updated") or []}
    p_deleted = {preview_ref_key(r) for r in objs.get("deleted") or []}
    a_created, a_deleted = set(actual["created"]), set(actual["deleted"])
    a_updated = {u["key"]: u["paths"] for u in actual["updated"]}
    a_recreated = set(actual["recreated"])
    meta_only = {m["key"]: m["fields"] for m in actual["metadata_only"]}
    for k in sorted(a_created - p_created):
        diffs.append(f"objects.created: not in the preview: {show_key(k)}")
    for k in sorted(p_created - a_created):
        why = "it existed before and still does" if k in before["objects"] else "it does not exist after the upgrade"
        if k in a_recreated:
            why = "it was deleted and made again (new uid)"
        diffs.append(f"objects.created: in the preview but not created ({why}): {show_key(k)}")
    for k in sorted(a_deleted - p_deleted):
        diffs.append(f"objects.deleted: not in the preview: {show_key(k)}")
    for k in sorted(p_deleted - a_deleted):
        diffs.append(f"objects.deleted: in the preview but not deleted: {show_key(k)}")
    for k in sorted(set(a_updated) - p_updated):
        diffs.append(f"objects.updated: not in the preview: {show_key(k)} (changed: {', '.join(a_updated[k])})")
    for k in sorted(a_recreated - p_updated - p_created):
        diffs.append(f"objects.updated: made again (deleted and created, new uid), not in the preview: {show_key(k)}")
    for k in sorted(p_updated - set(a_updated) - a_recreated):
        if k in meta_only:
            why = f"only its metadata changed: {', '.join(meta_only[k])}"
        elif k in a_created:
            why = "it was created"
        elif k in a_deleted:
            why = "it was deleted"
        elif k in before["objects"]:
            why = "unchanged"
        else:
            why = "it does not exist"
        diffs.append(f"objects.updated: in the preview but not updated ({why}): {show_key(k)}")

    # RBAC per ServiceAccount: the preview's added/removed rules against the net change of
    # the rules the account's bindings grant.
    held_before = effective_rbac(before)
    p_rbac = {}
    for acc in impact.get("rbac") or []:
        sa = acc.get("serviceAccount")
        for side in ("added", "removed"):
            for rc in acc.get(side) or []:
                p_rbac.setdefault(sa, {"added": {}, "removed": {}})[side][(rc.get("scope"), norm_rule(rc.get("rule") or {}))] = rc
    for sa in sorted(set(p_rbac) | set(actual["rbac"])):
        for side in ("added", "removed"):
            p = p_rbac.get(sa, {}).get(side, {})
            a = {tuple(x) for x in actual["rbac"].get(sa, {}).get(side, [])}
            for scope, rule in sorted(a - set(p)):
                other = "Cluster" if scope == "Namespace" else "Namespace"
                hint = f" (the preview has it with scope {other})" if (other, rule) in p else ""
                diffs.append(f"rbac {sa}: {side} {scope} {rule}: not in the preview{hint}")
            for scope, rule in sorted(set(p) - a):
                other = "Cluster" if scope == "Namespace" else "Namespace"
                hint = f" (it was {side} with scope {other})" if (other, rule) in a else ""
                diffs.append(f"rbac {sa}: the preview has {side} {scope} {rule}, not so{hint}")
            if side == "added":
                for (scope, rule), rc in sorted(p.items()):
                    allowed = rule_covered(rule, held_before.get(sa, set()), scope)
                    if bool(rc.get("escalation")) == allowed:
                        diffs.append(f"rbac {sa}: added {scope} {rule}: escalation {bool(rc.get('escalation'))}, but "
                                     f"the account's rules before {'allowed' if allowed else 'did not allow'} it")

    # Images per Deployment and container.
    def dep_name(d, ns_hint):
        return tuple(d.split("/", 1)) if "/" in (d or "") else (ns_hint, d)
    a_img = {(i["deployment"], i["container"]): (i["namespace"], i["from"], i["to"]) for i in actual["images"]}
    p_img = {}
    for i in impact.get("images") or []:
        ns, d = dep_name(i.get("deployment"), None)
        p_img[(d, i.get("container"))] = (ns, i.get("from"), i.get("to"))
    for k in sorted(set(a_img) | set(p_img), key=str):
        a, p = a_img.get(k), p_img.get(k)
        if p is None:
            diffs.append(f"images: {k[0]}/{k[1]}: {a[1]} → {a[2]}: not in the preview")
        elif a is None:
            diffs.append(f"images: {k[0]}/{k[1]}: the preview has {p[1]} → {p[2]}, the image did not change")
        elif (a[1], a[2]) != (p[1], p[2]):
            diffs.append(f"images: {k[0]}/{k[1]}: the preview has {p[1]} → {p[2]}, it was {a[1]} → {a[2]}")

    # CRDs: each listed with the preview's fields.
    p_crds = {c.get("name"): c for c in impact.get("crds") or []}
    fields = ("versionsAdded", "versionsUnserved", "versionsRemoved", "storedVersionsUnserved")
    for name in sorted(set(p_crds) | set(actual["crds"])):
        a, p = actual["crds"].get(name), p_crds.get(name)
        if p is None:
            # A CRD whose only change is outside versions and schemas (printer columns, a
            # description of the CRD…) need not be listed.
            if a["change"] == "Created" or any(a[f] for f in fields) or a["schemaChanged"]:
                diffs.append(f"crds {name}: {a['change']} " + json.dumps({f: a[f] for f in fields + ('schemaChanged',) if a[f]})
                             + ": not in the preview")
            continue
        if a is None:
            diffs.append(f"crds {name}: the preview has {p.get('change')}, its spec did not change")
            continue
        if p.get("change") != a["change"]:
            diffs.append(f"crds {name}: change {p.get('change')} in the preview, {a['change']}")
        for f in fields:
            if sorted(p.get(f) or []) != a[f]:
                diffs.append(f"crds {name}: {f} {sorted(p.get(f) or [])} in the preview, {a[f]}")
        if bool(p.get("schemaChanged")) != a["schemaChanged"]:
            diffs.append(f"crds {name}: schemaChanged {bool(p.get('schemaChanged'))} in the preview, {a['schemaChanged']}")
        if p.get("objectsFailing"):
            diffs.append(f"crds {name}: the preview has objects failing {p['objectsFailing']}, and the CRD was "
                         f"{'updated' if plan_phase == 'Complete' else 'not updated (plan ' + str(plan_phase) + ')'}")

    # Webhooks and APIServices: named by the webhook (or its configuration) or the APIService.
    a_hooks = {(w["kind"], w["name"]): w for w in actual["webhooks"]}
    p_hooks = [(w.get("kind"), w.get("name"), w.get("change")) for w in impact.get("webhooks") or []]
    matched = set()
    for kind, name, change in p_hooks:
        hit = next((hk for hk, w in a_hooks.items() if hk[0] == kind and name in (w["name"], w["owner"])), None)
        if hit is None:
            diffs.append(f"webhooks: the preview has {kind} {name} {change}, no such change")
            continue
        matched.add(hit)
        if a_hooks[hit]["change"] != change:
            diffs.append(f"webhooks: {kind} {name}: {change} in the preview, {a_hooks[hit]['change']}")
    for hk in sorted(set(a_hooks) - matched):
        w = a_hooks[hk]
        diffs.append(f"webhooks: {w['kind']} {w['name']} (in {w['owner']}) {w['change']}: not in the preview")
    a_api = {s["name"]: s["change"] for s in actual["api_services"]}
    p_api = {s.get("name"): s.get("change") for s in impact.get("apiServices") or []}
    for name in sorted(set(a_api) | set(p_api)):
        if a_api.get(name) != p_api.get(name):
            diffs.append(f"apiServices {name}: {p_api.get(name) or 'absent'} in the preview, {a_api.get(name) or 'unchanged'}")

    if impact.get("blockers") and plan_phase == "Complete":
        diffs.append(f"blockers: the preview has {impact['blockers']}, yet the plan ran (Complete)")
    return diffs


# ---------------------------------------------------------------------------- the toy packages


TOY_CASES = [
    # case, what 2.0.0 changes, objects made at 2.0.0, expected
    ("same", "nothing in its CRD", "v1 mode=fast", "accepted"),
    ("storage", "adds v2 as the storage version (v1 still served)", "v2 mode=fast", "refused"),
    ("enum", "widens the enum of spec.mode with turbo", "v1 mode=turbo", "refused"),
    ("field", "adds an optional spec.extra", "v1 mode=fast, no extra", "accepted"),
    ("pruned", "adds an optional spec.extra", "v1 mode=fast, extra=kept", "refused"),
]


def toy_crd(case, version):
    group = f"{case}.toys.bench.olm.example"
    props = {"mode": {"type": "string", "enum": ["fast", "slow"]}, "size": {"type": "integer"}}
    if version == "2.0.0" and case == "enum":
        props["mode"] = {"type": "string", "enum": ["fast", "slow", "turbo"]}
    if version == "2.0.0" and case in ("field", "pruned"):
        props["extra"] = {"type": "string"}
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}
    versions = [{"name": "v1", "served": True, "storage": True, "schema": schema}]
    if version == "2.0.0" and case == "storage":
        versions = [{"name": "v1", "served": True, "storage": False, "schema": schema},
                    {"name": "v2", "served": True, "storage": True, "schema": schema}]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                     "versions": versions}}


def toy_csv(case, version):
    pkg, crd = f"toy-{case}", toy_crd(case, version)
    group = crd["spec"]["group"]
    owned = [{"name": crd["metadata"]["name"], "version": v["name"], "kind": "Widget", "displayName": "Widget",
              "description": "A toy resource."} for v in crd["spec"]["versions"]]
    spec = {
        "displayName": f"Toy {case}", "description": f"A toy operator of upgrades.py (case {case}).",
        "version": version, "maturity": "alpha", "provider": {"name": "olm-rs bench"},
        "keywords": ["toy"], "maintainers": [{"name": "bench", "email": "bench@example.com"}],
        "links": [{"name": "bench", "url": "https://example.com"}], "minKubeVersion": "1.20.0",
        "installModes": [{"type": m, "supported": m != "MultiNamespace"} for m in MODES],
        "customresourcedefinitions": {"owned": owned},
        "install": {"strategy": "deployment", "spec": {
            "deployments": [{"name": f"{pkg}-controller", "spec": {
                "replicas": 1, "selector": {"matchLabels": {"app": pkg}},
                "template": {"metadata": {"labels": {"app": pkg}}, "spec": {
                    "serviceAccountName": pkg,
                    "containers": [{"name": "manager", "image": f"quay.io/olm-rs-bench/toy:{version}"}]}}}}],
            "permissions": [{"serviceAccountName": pkg, "rules": [
                {"apiGroups": [group], "resources": ["widgets", "widgets/status"], "verbs": ["*"]}]}]}},
    }
    if version == "2.0.0":
        spec["replaces"] = f"{pkg}.v1.0.0"
    return {"apiVersion": f"{OPS}/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": f"{pkg}.v{version}", "annotations": {"capabilities": "Basic Install"}}, "spec": spec}


def write_toys(olm, dest):
    """The toy packages as bundle directories, rendered to FBC: dest/fbc/toy-<case>/catalog.json."""
    for case, *_ in TOY_CASES:
        pkg = f"toy-{case}"
        for version in ("1.0.0", "2.0.0"):
            bdir = dest / "bundles" / pkg / version
            (bdir / "manifests").mkdir(parents=True, exist_ok=True)
            (bdir / "metadata").mkdir(parents=True, exist_ok=True)
            # JSON is YAML: no YAML writer needed.
            (bdir / "manifests" / f"{pkg}.clusterserviceversion.yaml").write_text(json.dumps(toy_csv(case, version), indent=1))
            (bdir / "manifests" / "widgets.crd.yaml").write_text(json.dumps(toy_crd(case, version), indent=1))
            (bdir / "metadata" / "annotations.yaml").write_text(json.dumps({"annotations": {
                "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
                "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
                "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
                "operators.operatorframework.io.bundle.package.v1": pkg,
                "operators.operatorframework.io.bundle.channels.v1": "stable",
                "operators.operatorframework.io.bundle.channel.default.v1": "stable"}}, indent=1))
        error, _plan = ic.render_one(olm, dest / "bundles" / pkg, dest / "fbc" / pkg)
        if error:
            raise BenchError(f"the toy package {pkg} does not render: {error}")
    return dest / "fbc"


# ---------------------------------------------------------------------------- the run


class Stage(Exception):
    """An edge or case stopped at a stage (the outcome names it)."""

    def __init__(self, stage, detail):
        super().__init__(f"{stage}: {detail}")
        self.stage, self.detail = stage, detail


def features(olm):
    """Which of the preview and the upgrade policy the binary's CRDs carry."""
    text = subprocess.run([olm, "crds"], capture_output=True, text=True).stdout
    return {"impact": "impact" in text, "upgradePolicy": "upgradePolicy" in text, "rollbackTo": "rollbackTo" in text,
            "replacedCSV": "replacedCSV" in text}


def pick_olm(arg):
    if arg:
        path = Path(arg).resolve()
        if not os.access(path, os.X_OK):
            raise BenchError(f"no {path}")
        return path
    release, debug = REPO / "target/release/olm", REPO / "target/debug/olm"
    if not os.access(release, os.X_OK):
        if not os.access(debug, os.X_OK):
            raise BenchError("no target/release/olm nor target/debug/olm: cargo build --release --bin olm")
        return debug
    if os.access(debug, os.X_OK) and not all(features(release).values()) and all(features(debug).values()):
        log("target/release/olm lacks the preview or the upgrade policy, target/debug/olm has them: using it")
        return debug
    return release


class Bench:
    def __init__(self, args, work, olm, feats):
        self.args, self.work, self.olm, self.feats = args, work, olm, feats
        self.cluster = Cluster("upgrades", audit=False)
        self.procs = Processes(work)
        self.notes = []

    # -- cluster and OLM

    def k(self, *a, stdin=None, check=True):
        return self.cluster.kubectl(*a, stdin=stdin, check=check)

    def create(self, *objs):
        self.k("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objs)}))

    def alive(self):
        for proc in self.procs.procs:
            self.procs.check(proc)

    def wait(self, what, timeout, fn, interval=0.5):
        deadline = time.time() + timeout
        while True:
            value = fn()
            if value:
                return value
            self.alive()
            if time.time() > deadline:
                raise Stage(what, f"not within {timeout:g} s")
            time.sleep(interval)

    def start(self, catalog_dir):
        self.cluster.up(nodes=self.args.nodes)
        self.api = Api(self.cluster.kubeconfig, self.work)
        self.discovery = Discovery(self.api)
        self.k("create", "namespace", GLOBAL_NS)
        self.k("create", "-f", "-", stdin=subprocess.run([self.olm, "crds"], capture_output=True, text=True,
                                                          check=True).stdout)
        self.k("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        self.k("apply", "--server-side", "-f", ic.monitoring_crds())
        port = free_port()
        server = self.procs.spawn("olm-catalog-serve", [self.olm, "catalog", "serve", catalog_dir,
                                                        "--address", "127.0.0.1", "--port", port])
        wait_port(server, port, 600)
        admin = free_port()
        olm = self.procs.spawn("olm-run", [self.olm, "run", "--leader-elect=false", "--packages-address", "off",
                                           "--disable-copied-csvs", "--admin-address", f"127.0.0.1:{admin}"],
                               env=dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig)), cwd=self.work)
        wait_ready(olm, admin, 60)
        self.create({"apiVersion": f"{OPS}/v1alpha1", "kind": "CatalogSource",
                     "metadata": {"name": CATALOG, "namespace": GLOBAL_NS},
                     "spec": {"sourceType": "grpc", "address": f"127.0.0.1:{port}", "displayName": "upgrades bench"}})
        path = f"/apis/{OPS}/v1alpha1/namespaces/{GLOBAL_NS}/catalogsources/{CATALOG}"
        self.wait("CatalogSource READY", 900, lambda: ((((self.api.get(path) or {}).get("status") or {})
                                                          .get("connectionState") or {}).get("lastObservedState")) == "READY")
        log("OLM and the catalog are up")

    def teardown(self):
        self.procs.stop_all()
        self.cluster.down()

    # -- reads

    def get(self, path):
        return self.api.get(path)

    def csv(self, ns, name):
        return self.get(f"/apis/{OPS}/v1alpha1/namespaces/{ns}/clusterserviceversions/{name}")

    def sub(self, ns, name):
        return self.get(f"/apis/{OPS}/v1alpha1/namespaces/{ns}/subscriptions/{name}") or {}

    def plans(self, ns):
        items = (self.get(f"/apis/{OPS}/v1alpha1/namespaces/{ns}/installplans") or {}).get("items") or []
        return sorted(items, key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))

    def approve(self, ns, plan):
        self.k("patch", "installplan", plan, "-n", ns, "--type", "merge", "-p", '{"spec":{"approved":true}}')

    def sub_summary(self, ns, name):
        st = self.sub(ns, name).get("status") or {}
        conds = "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason', '')}: {short(c.get('message'), 300)}"
                          for c in st.get("conditions") or [] if c.get("status") == "True")
        return f"state {st.get('state') or '(none)'}, currentCSV {st.get('currentCSV')}, installedCSV " \
               f"{st.get('installedCSV')}" + (f"; {conds}" if conds else "")

    def csv_phase(self, ns, name):
        c = self.csv(ns, name)
        if c is None:
            return None
        st = c.get("status") or {}
        return st.get("phase") or "", st.get("reason") or "", st.get("message") or ""

    def wait_csv(self, ns, name, timeout, sub_name):
        """Until the CSV is Succeeded; Stage when it Failed or on timeout (with what is known)."""
        deadline = time.time() + timeout
        while True:
            ph = self.csv_phase(ns, name)
            if ph and ph[0] == "Succeeded":
                return
            if ph and ph[0] == "Failed":
                raise Stage("failed", f"CSV {name} Failed {ph[1]}: {short(ph[2], 400)}")
            self.alive()
            if time.time() > deadline:
                what = f"CSV {name} {ph[0] or '(no phase)'} {ph[1]}: {short(ph[2], 300)}" if ph else f"no CSV {name}"
                raise Stage("timeout", f"{what} after {timeout:g} s; Subscription {self.sub_summary(ns, sub_name)}")
            time.sleep(0.5)

    # -- namespaces

    def make_namespace(self, ns, targets):
        names = [ns, *(t for t in targets or [] if t != ns)]
        self.create(*({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in names))
        spec = {} if targets is None else {"targetNamespaces": targets}
        self.create({"apiVersion": f"{OPS}/v1", "kind": "OperatorGroup", "metadata": {"name": "og", "namespace": ns},
                     "spec": spec})
        self.wait("OperatorGroup status", 60, lambda: ((self.get(
            f"/apis/{OPS}/v1/namespaces/{ns}/operatorgroups/og") or {}).get("status") or {}).get("namespaces") is not None)
        return names

    def cleanup(self, names, baseline):
        """Removes an edge's namespaces, then what it left cluster-wide (objects of the base
        kinds not in `baseline`): the next edge starts from the same cluster. Returns notes."""
        notes = []
        for n in names:
            self.k("delete", "namespace", n, "--wait=false", "--ignore-not-found", check=False)
        try:
            self.wait("namespaces deleted", self.args.cleanup_timeout,
                      lambda: all(self.get(f"/api/v1/namespaces/{n}") is None for n in names), interval=1)
        except Stage as e:
            notes.append(f"cleanup: {e}")
        now = take_snapshot(self.api, self.discovery, BASE_KINDS)
        left = [k for k in now["objects"] if split_key(k)[2] == "" and k not in baseline["objects"]]
        if left:
            kinds = sorted({split_key(k)[1] for k in left})
            notes.append(f"cleanup: {len(left)} cluster-scoped object(s) left once the namespaces were gone "
                         f"({', '.join(kinds)}); deleted")
            for k in left:
                group, kind, _, name = split_key(k)
                found = self.discovery.resolve(group, next(v for g, v, kd in BASE_KINDS if kd == kind), kind)
                if found:
                    self.k("delete", f"{found[1]}.{group}" if group else found[1], name, "--wait=false",
                           "--ignore-not-found", check=False)
            try:
                self.wait("leftovers deleted", self.args.cleanup_timeout, lambda: not any(
                    k in take_snapshot(self.api, self.discovery, BASE_KINDS)["objects"] for k in left), interval=1)
            except Stage as e:
                notes.append(f"cleanup: {e}")
        return notes

    # -- part 1: one edge

    def subscribe(self, ns, name, package, channel, starting, approval="Manual", policy=None):
        spec = {"name": package, "channel": channel, "source": CATALOG, "sourceNamespace": GLOBAL_NS,
                "installPlanApproval": approval, "startingCSV": starting}
        if policy is not None:
            spec["upgradePolicy"] = policy
        self.create({"apiVersion": f"{OPS}/v1alpha1", "kind": "Subscription",
                     "metadata": {"name": name, "namespace": ns}, "spec": spec})

    def install_from(self, ns, sub_name, csv_name, notes):
        """Until the starting CSV is Succeeded, approving its plan by hand when firstInstall
        did not (a binary without upgradePolicy)."""
        deadline = time.time() + self.args.install_timeout
        approved = set()
        while True:
            for p in self.plans(ns):
                names = (p.get("spec") or {}).get("clusterServiceVersionNames") or []
                phase = (p.get("status") or {}).get("phase")
                if csv_name in names and phase == "RequiresApproval" and p["metadata"]["name"] not in approved:
                    self.approve(ns, p["metadata"]["name"])
                    approved.add(p["metadata"]["name"])
                    notes.append(f"the first plan {p['metadata']['name']} waited for approval"
                                 + (" (firstInstall Automatic not honoured)" if self.feats["upgradePolicy"] else
                                    " (no upgradePolicy in this binary)") + "; approved by hand")
            ph = self.csv_phase(ns, csv_name)
            if ph and ph[0] == "Succeeded":
                return
            if ph and ph[0] == "Failed":
                raise Stage("not installed at from", f"CSV {csv_name} Failed {ph[1]}: {short(ph[2], 400)}")
            # The catalog is READY and does not change: a failed resolution (a startingCSV
            # another entry skips, as upstream, or an unmet dependency), plan or unpack is final.
            failed = next((c for c in (self.sub(ns, sub_name).get("status") or {}).get("conditions") or []
                           if c.get("type") in ic.FINAL_CONDITIONS and c.get("status") == "True"), None)
            if failed and ph is None:
                raise Stage("not installed at from", f"{failed.get('type')} {failed.get('reason')}: "
                            f"{short(failed.get('message'), 500)}")
            self.alive()
            if time.time() > deadline:
                what = f"CSV {csv_name} {ph[0] or '(no phase)'} {ph[1]}: {short(ph[2], 300)}" if ph else f"no CSV {csv_name}"
                raise Stage("not installed at from", f"{what} after {self.args.install_timeout:g} s; Subscription "
                            f"{self.sub_summary(ns, sub_name)}")
            time.sleep(0.5)

    def upgrade_plan(self, ns, sub_name, src, want_impact):
        """The plan that moves off `src`, once in RequiresApproval (with status.impact when
        the binary computes one)."""
        deadline = time.time() + self.args.plan_timeout
        seen = None
        while True:
            for p in self.plans(ns):
                names = (p.get("spec") or {}).get("clusterServiceVersionNames") or []
                if src in names:
                    continue
                seen = p
                phase = (p.get("status") or {}).get("phase")
                if phase == "RequiresApproval" and (not want_impact or (p.get("status") or {}).get("impact")):
                    return p
                if phase in ("Complete", "Installing", "Failed"):
                    raise Stage("upgrade plan not held", f"plan {p['metadata']['name']} for {names} is {phase} "
                                "without approval")
            self.alive()
            if time.time() > deadline:
                if seen is not None:
                    st = seen.get("status") or {}
                    raise Stage("no preview" if want_impact else "upgrade plan", f"plan {seen['metadata']['name']} "
                                f"phase {st.get('phase')}, impact {'present' if st.get('impact') else 'absent'} after "
                                f"{self.args.plan_timeout:g} s")
                raise Stage("no upgrade plan", f"after {self.args.plan_timeout:g} s; Subscription "
                            f"{self.sub_summary(ns, sub_name)}")
            time.sleep(0.5)

    def run_edge(self, i, edge, feats):
        ns = edge_namespace(i, edge["package"])
        targets, mode = group_for(edge, ns, self.args.prefer_mode)
        out = {**edge, "namespace": ns, "operator_group": mode, "stage": None, "detail": "", "notes": [],
               "installed_from": False, "preview": None, "differences": [], "seconds": {}}
        edir = self.work / "edges" / ns
        edir.mkdir(parents=True, exist_ok=True)
        started = time.time()
        baseline = take_snapshot(self.api, self.discovery, BASE_KINDS)
        names = []
        try:
            names = self.make_namespace(ns, targets)
            # Without upgradePolicy in the CRD (kubectl would refuse the field), the first plan
            # is approved by hand instead.
            policy = {"firstInstall": "Automatic"} if feats["upgradePolicy"] else None
            self.subscribe(ns, "sub", edge["package"], edge["channel"], edge["from"], "Manual", policy)
            self.install_from(ns, "sub", edge["from"], out["notes"])
            out["installed_from"] = True
            out["seconds"]["install_from"] = round(time.time() - started, 1)
            plan = self.upgrade_plan(ns, "sub", edge["from"], feats["impact"])
            plan_name = plan["metadata"]["name"]
            targets_csv = plan["spec"].get("clusterServiceVersionNames") or []
            out["plan"] = plan_name
            out["plan_csvs"] = targets_csv
            if edge["to"] not in targets_csv:
                out["notes"].append(f"the upgrade plan goes to {targets_csv}, not the head {edge['to']}")
            to_csv = edge["to"] if edge["to"] in targets_csv else next(
                (c for c in targets_csv if c.startswith(edge["package"])), targets_csv[0] if targets_csv else edge["to"])
            # Kinds: the base ones, the plan's steps' and the preview's.
            kinds = list(BASE_KINDS)
            extra = {((s.get("resource") or {}).get("group") or "", (s.get("resource") or {}).get("version") or "v1",
                      (s.get("resource") or {}).get("kind")) for s in (plan.get("status") or {}).get("plan") or []}
            impact0 = (plan.get("status") or {}).get("impact") or {}
            for side in ("created", "updated", "deleted"):
                for r in (impact0.get("objects") or {}).get(side) or []:
                    av = r.get("apiVersion") or "v1"
                    extra.add((group_of(av), av.rsplit("/", 1)[-1], r.get("kind")))
            for g, v, kd in sorted(extra, key=str):
                if kd and (g, kd) not in SKIP_KINDS and not any((g, kd) == (b[0], b[2]) for b in kinds):
                    kinds.append((g, v, kd))
            before, settled = stable_snapshot(self.api, self.discovery, kinds, self.args.settle_timeout,
                                              self.args.quiet, alive=self.alive)
            if not settled:
                out["notes"].append(f"before: the cluster still changed after {self.args.settle_timeout:g} s")
            plan = self.get(f"/apis/{OPS}/v1alpha1/namespaces/{ns}/installplans/{plan_name}")  # the preview as approved
            impact = (plan.get("status") or {}).get("impact")
            out["preview"] = impact
            approved_at = time.time()
            self.approve(ns, plan_name)
            try:
                self.wait_csv(ns, to_csv, self.args.upgrade_timeout, "sub")
            except Stage as e:
                raise Stage("upgrade " + e.stage, e.detail)
            self.wait(f"the old CSV {edge['from']} gone", self.args.upgrade_timeout,
                      lambda: self.csv(ns, edge["from"]) is None)
            def finished():
                phase = ((self.get(f"/apis/{OPS}/v1alpha1/namespaces/{ns}/installplans/{plan_name}") or {})
                         .get("status") or {}).get("phase")
                return phase if phase in ("Complete", "Failed") else None
            plan_phase = self.wait("the plan Complete or Failed", 60, finished)
            out["plan_phase"] = plan_phase
            out["seconds"]["upgrade"] = round(time.time() - approved_at, 1)
            after, settled = stable_snapshot(self.api, self.discovery, kinds, self.args.settle_timeout,
                                             self.args.quiet, alive=self.alive)
            # The garbage collector deletes what the old CSV owned alone, in its own time (it
            # pauses while it resyncs for new CRDs): the end state is once it has.
            gc_deadline = time.time() + self.args.settle_timeout
            while orphans_of_csvs(after) and time.time() < gc_deadline:
                after, settled = stable_snapshot(self.api, self.discovery, kinds, self.args.settle_timeout,
                                                 self.args.quiet, alive=self.alive)
            if orphans_of_csvs(after):
                out["notes"].append(f"after: still owned only by deleted CSVs: {sorted(orphans_of_csvs(after))}")
            if not settled:
                out["notes"].append(f"after: the cluster still changed after {self.args.settle_timeout:g} s")
            for name, value in (("plan", plan), ("before", before), ("after", after)):
                (edir / f"{name}.json").write_text(json.dumps(value))
            actual = actual_changes(before, after)
            out["actual"] = actual
            if impact is None:
                out["stage"] = "no preview"
                out["detail"] = "the plan as approved has no status.impact" + (
                    "" if feats["impact"] else " (this binary computes none)")
            else:
                out["differences"] = compare(impact, actual, before, plan_phase)
                out["stage"] = "compared"
        except Stage as e:
            out["stage"], out["detail"] = e.stage, e.detail
        out["seconds"]["edge"] = round(time.time() - started, 1)
        if names:
            out["notes"] += self.cleanup(names, baseline)
        return out

    # -- part 2: one rollback case

    def run_rollback(self, case, change, objects, expected):
        pkg = f"toy-{case}"
        ns = f"rb-{case}"
        crd = toy_crd(case, "2.0.0")
        group = crd["spec"]["group"]
        out = {"case": case, "change": change, "objects": objects, "expected": expected, "got": None, "detail": "",
               "notes": []}
        try:
            self.make_namespace(ns, [ns])
            self.subscribe(ns, pkg, pkg, "stable", f"{pkg}.v1.0.0", "Automatic",
                           {"firstInstall": "Automatic"} if self.feats["upgradePolicy"] else None)
            # Automatic: 1.0.0, then the upgrade to 2.0.0 (a held plan is approved: not the point here).
            deadline = time.time() + self.args.upgrade_timeout
            while True:
                for p in self.plans(ns):
                    if (p.get("status") or {}).get("phase") == "RequiresApproval":
                        self.approve(ns, p["metadata"]["name"])
                        out["notes"].append(f"plan {p['metadata']['name']} waited for approval; approved by hand")
                ph = self.csv_phase(ns, f"{pkg}.v2.0.0")
                if ph and ph[0] == "Succeeded" and self.csv(ns, f"{pkg}.v1.0.0") is None:
                    break
                if ph and ph[0] == "Failed":
                    raise Stage("upgrade failed", f"{pkg}.v2.0.0 Failed {ph[1]}: {ph[2]}")
                self.alive()
                if time.time() > deadline:
                    raise Stage("upgrade timeout", f"no {pkg}.v2.0.0 Succeeded alone after {self.args.upgrade_timeout:g}"
                                f" s; Subscription {self.sub_summary(ns, pkg)}")
                time.sleep(0.5)
            version = "v2" if case == "storage" else "v1"
            spec = {"mode": "turbo" if case == "enum" else "fast", "size": 3}
            if case == "pruned":
                spec["extra"] = "kept"  # 1.0.0's schema does not know it: the server would drop it
            self.create(*({"apiVersion": f"{group}/{version}", "kind": "Widget",
                           "metadata": {"name": f"w{n}", "namespace": ns}, "spec": spec} for n in (1, 2)))
            crd_before = self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}")
            out["stored_versions"] = (crd_before.get("status") or {}).get("storedVersions")
            try:
                self.k("patch", "subscription", pkg, "-n", ns, "--type", "merge",
                       "-p", json.dumps({"spec": {"upgradePolicy": {"rollbackTo": "1.0.0"}}}))
            except BenchError as e:
                raise Stage("rollbackTo not written", str(e))
            rolled_at = time.time()

            def outcome():
                st = self.sub(ns, pkg).get("status") or {}
                held = next((c for c in st.get("conditions") or [] if c.get("type") == "UpgradeHeld"
                             and c.get("status") == "True" and c.get("reason") == "RollbackRefused"), None)
                if held:
                    return "refused", held.get("message") or ""
                # The rollback's plan is never approved here: OLM runs it, or holds it and says why.
                ph = self.csv_phase(ns, f"{pkg}.v1.0.0")
                if ph and ph[0] == "Succeeded":
                    return "accepted", f"{pkg}.v1.0.0 Succeeded; installedCSV {st.get('installedCSV')}, " \
                        f"replacedCSV {st.get('replacedCSV')}"
                if ph and ph[0] == "Failed":
                    return "failed", f"{pkg}.v1.0.0 Failed {ph[1]}: {short(ph[2], 300)}"
                return None
            try:
                out["got"], out["detail"] = self.wait("the rollback's outcome", self.args.rollback_timeout, outcome)
            except Stage:
                out["got"], out["detail"] = "neither", f"after {self.args.rollback_timeout:g} s: Subscription " \
                    f"{self.sub_summary(ns, pkg)}"
            out["seconds"] = round(time.time() - rolled_at, 1)
            # What stands afterwards: the CSVs and the CRD's versions.
            csvs = (self.get(f"/apis/{OPS}/v1alpha1/namespaces/{ns}/clusterserviceversions") or {}).get("items") or []
            out["csvs_after"] = {c["metadata"]["name"]: (c.get("status") or {}).get("phase") for c in csvs}
            crd_after = self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}")
            out["crd_versions_after"] = [v["name"] for v in (crd_after.get("spec") or {}).get("versions") or []]
            items = (self.get(f"/apis/{group}/v1/namespaces/{ns}/widgets") or {}).get("items") or []
            out["objects_readable_as_v1"] = len(items)
            st = self.sub(ns, pkg).get("status") or {}
            out["replacedCSV"], out["installedCSV"] = st.get("replacedCSV"), st.get("installedCSV")
            out["upgrade_held"] = next(({k: c.get(k) for k in ("status", "reason", "message")}
                                        for c in st.get("conditions") or [] if c.get("type") == "UpgradeHeld"), None)
            out["plans"] = [{"name": p["metadata"]["name"], "csvs": (p.get("spec") or {}).get("clusterServiceVersionNames"),
                             "phase": (p.get("status") or {}).get("phase"), "approved": (p.get("spec") or {}).get("approved"),
                             "blockers": ((p.get("status") or {}).get("impact") or {}).get("blockers")}
                            for p in self.plans(ns)]
        except Stage as e:
            out["got"], out["detail"] = f"not reached ({e.stage})", e.detail
        return out


# ---------------------------------------------------------------------------- catalog preparation


def prepare_community(args, work, olm):
    """Each package of CATALOG_REPO rendered and validated on its own (install-catalog.py's
    render_one), cached in the work directory; returns {package: (plan, docs)} and the dropped."""
    root = Path(args.catalog_repo) / "operators"
    if not root.is_dir():
        raise BenchError(f"{root} is not a directory (CATALOG_REPO must hold operators/<package>/)")
    packages = sorted(p.name for p in root.iterdir() if p.is_dir())
    key = {"repo": str(root.resolve()), "packages": packages, "olm": str(olm), "mtime": os.stat(olm).st_mtime}
    state = work / "community.json"
    if state.exists() and json.loads(state.read_text()).get("key") == key:
        saved = json.loads(state.read_text())
        log(f"reusing the rendered catalog in {work / 'catalog'}")
    else:
        shutil.rmtree(work / "catalog", ignore_errors=True)
        log(f"rendering and validating {len(packages)} packages of {root}")
        plans, dropped = {}, {}
        for i, p in enumerate(packages, 1):
            error, plan = ic.render_one(olm, root / p, work / "catalog" / p)
            if error:
                dropped[p] = error
                shutil.rmtree(work / "catalog" / p, ignore_errors=True)
            else:
                plans[p] = plan
            if i % 20 == 0:
                log(f"  {i}/{len(packages)} rendered ({len(dropped)} dropped)")
        saved = {"key": key, "plans": plans, "dropped": dropped}
        state.write_text(json.dumps(saved, indent=1))
    docs = {p: ic.read_stream(work / "catalog" / p / "catalog.json") for p in saved["plans"]}
    return saved["plans"], saved["dropped"], docs


def select_edges(args, plans, docs):
    """The edges to run, and why packages have none."""
    wanted = None
    if args.packages:
        wanted = [p.strip() for p in args.packages.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in plans]
        if unknown:
            raise BenchError(f"--packages: not rendered (or not in the catalog): {', '.join(unknown)}")
    if args.installs_from:
        saved = json.loads(Path(args.installs_from).read_text())
        outcomes = (saved.get("sides", {}).get("ours") or {}).get("outcomes") or {}
        installs = {p for p, o in outcomes.items() if o.get("category") == "Succeeded"}
    else:
        installs = None
    edges, without = [], {}
    for pkg in sorted(plans):
        if wanted is not None and pkg not in wanted:
            continue
        if installs is not None and pkg not in installs:
            without[pkg] = f"did not install in {args.installs_from}"
            continue
        if plans[pkg].get("blocks_pods") and args.webhooks_on_pods == "off":
            without[pkg] = f"its webhook {plans[pkg]['blocks_pods']} on every Pod fails closed (kwok runs no webhook server)"
            continue
        found, skipped = package_edges(docs[pkg], args.edges)
        if not found:
            without[pkg] = "; ".join(f"channel {c}: {why}" for c, why in skipped) or "no channel"
        edges.extend(found)
    if args.limit:
        edges = edges[:args.limit]
    return edges, without


# ---------------------------------------------------------------------------- report


def diff_group(line):
    """A difference without its object's names: what groups it with others of its kind."""
    m = re.match(r"^(objects\.\w+: .*): (\S+) \S+$", re.sub(r" \(changed: [^()]*\)$", "", line))
    if m:
        return f"{m.group(1)}: {m.group(2)}"
    m = re.match(r"^rbac \S+: (.*?)(Namespace|Cluster) (\{.*?\})(.*)$", line)
    if m:
        rule = json.loads(m.group(3))
        what = "operatorconditions rule" if "operatorconditions" in rule.get("resources", []) else "a rule"
        return f"rbac: {m.group(1)}{m.group(2)} {what}{m.group(4)}"
    m = re.match(r"^(images|crds|webhooks|apiServices) \S+?: (.*)$", line)
    if m:
        return f"{m.group(1)}: " + re.sub(r"\S+/\S+|\[.*?\]|\S+\.v\S+", "…", m.group(2))
    return line


def table(rows):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def counts(results):
    edges = results.get("edges") or []
    present = [e for e in edges if e.get("preview") is not None and e.get("stage") == "compared"]
    c = {"edges tried": len(edges),
         "installed at from": sum(1 for e in edges if e.get("installed_from")),
         "upgrade plans held for approval": sum(1 for e in edges if e.get("plan")),
         "upgraded (new CSV Succeeded)": sum(1 for e in edges if e.get("actual") is not None),
         "previews present": len(present),
         "previews exact": sum(1 for e in present if not e["differences"]),
         "edges with differences": sum(1 for e in present if e["differences"]),
         "differences": sum(len(e["differences"]) for e in present)}
    rb = results.get("rollbacks") or []
    r = {"cases": len(rb), "expected accepted": sum(1 for x in rb if x["expected"] == "accepted"),
         "expected refused": sum(1 for x in rb if x["expected"] == "refused"),
         "accepted": sum(1 for x in rb if x["got"] == "accepted"),
         "refused": sum(1 for x in rb if x["got"] == "refused"),
         "as expected": sum(1 for x in rb if x["got"] == x["expected"])}
    return c, r


def report(results, out=sys.stdout):
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"olm: {results.get('olm')}  features: " + ", ".join(f"{k} {'yes' if v else 'no'}"
                                                         for k, v in (results.get("features") or {}).items()))
    for note in results.get("notes") or []:
        p(f"note: {note}")
    edges = results.get("edges")
    if edges is not None:
        p(f"\nUpgrade edges of {results.get('catalog_repo')} (edges: {results.get('edge_mode')}), each in its own namespace")
        rows = [["package", "channel", "from → to", "how", "group", "at from", "preview", "differences", "outcome"]]
        for e in edges:
            rows.append([e["package"], e["channel"], f"{e['from']} → {e['to']}", e["how"], e["operator_group"],
                         "yes" if e.get("installed_from") else "no",
                         "—" if e.get("stage") != "compared" else ("exact" if not e["differences"] else "differs"),
                         str(len(e["differences"])) if e.get("stage") == "compared" else "—",
                         "compared" if e.get("stage") == "compared" else short(f"{e['stage']}: {e['detail']}", 90)])
        if edges:
            p(table(rows))
        diffed = [e for e in edges if e.get("differences")]
        if diffed:
            p("\nDifferences between the preview and the upgrade, per edge:")
            for e in diffed:
                p(f"- {e['package']} {e['from']} → {e['to']} ({e['operator_group']}, namespace {e['namespace']}, "
                  f"plan {e.get('plan')} {e.get('plan_phase')}):")
                p(f"    preview summary: {short((e.get('preview') or {}).get('summary'), 300)}")
                for d in e["differences"]:
                    p(f"    {d}")
        if diffed:
            groups = {}
            for e in diffed:
                for d in e["differences"]:
                    g = groups.setdefault(diff_group(d), [0, set()])
                    g[0] += 1
                    g[1].add(e["package"] + " " + e["to"])
            p("\nDifferences grouped (count, edges):")
            for g, (n, where) in sorted(groups.items(), key=lambda kv: (-len(kv[1][1]), -kv[1][0], kv[0])):
                p(f"  {n:4d} {len(where):3d}  {g}")
        others = [e for e in edges if e.get("stage") != "compared"]
        if others:
            p("\nEdges not compared:")
            for e in others:
                p(f"- {e['package']} {e['from']} → {e['to']}: {e['stage']}: {short(e['detail'], 600)}")
        noted = [e for e in edges if e.get("notes")]
        if noted:
            p("\nNotes per edge:")
            for e in noted:
                for n in e["notes"]:
                    p(f"- {e['package']} {e['from']} → {e['to']}: {short(n, 400)}")
        if results.get("without_edges"):
            p(f"\nPackages without an edge run ({len(results['without_edges'])}):")
            for pkg, why in sorted(results["without_edges"].items()):
                p(f"- {pkg}: {short(why, 300)}")
        if results.get("dropped"):
            p(f"\nPackages that do not render or validate ({len(results['dropped'])}):")
            for pkg, why in sorted(results["dropped"].items()):
                p(f"- {pkg}: {short(why, 300)}")
    rb = results.get("rollbacks")
    if rb is not None:
        p("\nRollbacks (spec.upgradePolicy.rollbackTo: 1.0.0 after 1.0.0 → 2.0.0 and objects made)")
        rows = [["case", "2.0.0", "objects", "expected", "got", "as expected"]]
        for x in rb:
            rows.append([x["case"], x["change"], x["objects"], x["expected"], x["got"] or "—",
                         "yes" if x["got"] == x["expected"] else "NO"])
        if rb:
            p(table(rows))
            for x in rb:
                p(f"- {x['case']}: {short(x['detail'], 500)}"
                  + (f"; stored versions before {x.get('stored_versions')}, CSVs after {x.get('csvs_after')}, CRD "
                     f"versions after {x.get('crd_versions_after')}, widgets readable as v1 {x.get('objects_readable_as_v1')}"
                     if "csvs_after" in x else ""))
                held = x.get("upgrade_held")
                if held:
                    p(f"    UpgradeHeld {held.get('status')} {held.get('reason')}: {short(held.get('message'), 500)}")
                for plan in x.get("plans") or []:
                    p(f"    plan {plan['name']} {plan['csvs']} {plan['phase']}" + (" approved" if plan["approved"] else "")
                      + (f", blockers {plan['blockers']}" if plan.get("blockers") else ""))
                for n in x.get("notes") or []:
                    p(f"    note: {n}")
    c, r = counts(results)
    p("\nCounts")
    if edges is not None:
        p("  " + ", ".join(f"{k} {v}" for k, v in c.items()))
    if rb is not None:
        p("  rollback " + ", ".join(f"{k} {v}" for k, v in r.items()))


# ---------------------------------------------------------------------------- self-check


def self_check():
    """The pure parts (edge selection, ranges, snapshot diffs, preview comparison) on small cases."""
    def bundle(name, version, modes=("AllNamespaces",)):
        return {"schema": "olm.bundle", "name": name, "package": "p", "properties": [
            {"type": "olm.package", "value": {"packageName": "p", "version": version}},
            {"type": "olm.csv.metadata", "value": {"installModes": [{"type": m, "supported": True} for m in modes]}}]}
    docs = [{"schema": "olm.package", "name": "p", "defaultChannel": "stable"},
            {"schema": "olm.channel", "name": "stable", "package": "p", "entries": [
                {"name": "p.v1"}, {"name": "p.v2", "replaces": "p.v1"}, {"name": "p.v3", "replaces": "p.v2", "skips": ["p.v1"]}]},
            {"schema": "olm.channel", "name": "fast", "package": "p", "entries": [
                {"name": "p.v1"}, {"name": "p.v2"}, {"name": "p.v4", "skips": ["p.v1", "p.v2"], "skipRange": ">=1.0.0 <4.0.0"}]},
            {"schema": "olm.channel", "name": "single", "package": "p", "entries": [{"name": "p.v1"}]},
            bundle("p.v1", "1.0.0"), bundle("p.v2", "2.0.0", ("OwnNamespace", "AllNamespaces")), bundle("p.v3", "3.0.0"),
            bundle("p.v4", "4.0.0-rc.1")]
    edges, skipped = package_edges(docs)
    assert [(e["from"], e["to"], e["how"]) for e in edges] == [("p.v2", "p.v3", "replaces")], edges
    edges, skipped = package_edges(docs, "all-heads")
    assert [(e["channel"], e["from"], e["to"], e["how"]) for e in edges] == [
        ("stable", "p.v2", "p.v3", "replaces"), ("fast", "p.v2", "p.v4", "skips")], edges
    assert [c for c, _ in skipped] == ["single"], skipped
    assert in_range("1.2.3", ">=1.0.0 <1.3.0") and not in_range("1.3.0", ">=1.0.0 <1.3.0")
    assert in_range("0.9.0", "<0.5.0 || >=0.9.0") and not in_range("1.0.0-rc.1", ">=1.0.0")
    assert parse_version("1.0.0-alpha.10") > parse_version("1.0.0-alpha.9")
    assert group_for(edges[0], "ns") == (None, "AllNamespaces")
    assert group_for({"modes_from": ["OwnNamespace", "AllNamespaces"], "modes_to": ["OwnNamespace"]}, "ns") == (["ns"], "OwnNamespace")

    def snap(objs):
        return {"objects": {obj_key(g, k, ns, o["metadata"]["name"]): record_of(g, k, o) for g, k, ns, o in objs}}
    role_old = {"metadata": {"name": "r1", "uid": "1"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    role_new = {"metadata": {"name": "r2", "uid": "2"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                                                                  {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}]}
    bind = lambda n, role, uid: {"metadata": {"name": n, "uid": uid}, "roleRef": {"kind": "Role", "name": role},  # noqa: E731
                                 "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}
    dep = lambda img, uid="d": {"metadata": {"name": "op", "uid": uid, "labels": {"v": img}},  # noqa: E731
                                "spec": {"template": {"spec": {"containers": [{"name": "m", "image": img}]}}}}
    crd = lambda versions, stored, uid="c": {"metadata": {"name": "ws.x.io", "uid": uid}, "status": {"storedVersions": stored},  # noqa: E731
                                             "spec": {"group": "x.io", "versions": versions}}
    sch = lambda extra: {"openAPIV3Schema": {"type": "object", "properties": extra}}  # noqa: E731
    R, A = "rbac.authorization.k8s.io", "apiextensions.k8s.io"
    before = snap([(R, "Role", "ns", role_old), (R, "RoleBinding", "ns", bind("b1", "r1", "3")),
                   ("apps", "Deployment", "ns", dep("img:1")),
                   ("", "ServiceAccount", "ns", {"metadata": {"name": "sa", "uid": "s", "ownerReferences": [{"name": "a"}]}}),
                   (A, "CustomResourceDefinition", "", crd([{"name": "v1", "served": True, "storage": True, "schema": sch({})}], ["v1"]))])
    after = snap([(R, "Role", "ns", role_new), (R, "RoleBinding", "ns", bind("b2", "r2", "4")),
                  ("apps", "Deployment", "ns", dep("img:2")),
                  ("", "ServiceAccount", "ns", {"metadata": {"name": "sa", "uid": "s", "ownerReferences": [{"name": "b"}]}}),
                  (A, "CustomResourceDefinition", "", crd([{"name": "v1", "served": False, "storage": False, "schema": sch({})},
                                                           {"name": "v2", "served": True, "storage": True, "schema": sch({})}], ["v1"]))])
    actual = actual_changes(before, after)
    assert actual["created"] == sorted([obj_key(R, "Role", "ns", "r2"), obj_key(R, "RoleBinding", "ns", "b2")]), actual["created"]
    assert [u["key"] for u in actual["updated"]] == sorted([obj_key("apps", "Deployment", "ns", "op"),
                                                            obj_key(A, "CustomResourceDefinition", "", "ws.x.io")]), actual["updated"]
    assert actual["metadata_only"] == [{"key": obj_key("", "ServiceAccount", "ns", "sa"), "fields": ["ownerReferences"]}]
    added = json.dumps({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}, sort_keys=True)
    assert actual["rbac"] == {"ns/sa": {"added": [("Namespace", added)], "removed": []}}, actual["rbac"]
    assert actual["images"] == [{"namespace": "ns", "deployment": "op", "container": "m", "from": "img:1", "to": "img:2"}]
    assert actual["crds"]["ws.x.io"] == {"change": "Updated", "versionsAdded": ["v2"], "versionsUnserved": ["v1"],
                                         "versionsRemoved": [], "storedVersionsUnserved": ["v1"], "schemaChanged": False}
    exact = {"summary": "", "objects": {
        "created": [{"apiVersion": f"{R}/v1", "kind": "Role", "namespace": "ns", "name": "r2"},
                    {"apiVersion": f"{R}/v1", "kind": "RoleBinding", "namespace": "ns", "name": "b2"}],
        "updated": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ns", "name": "op"},
                    {"apiVersion": f"{A}/v1", "kind": "CustomResourceDefinition", "name": "ws.x.io"}],
        "deleted": [{"apiVersion": f"{R}/v1", "kind": "Role", "namespace": "ns", "name": "r1"},
                    {"apiVersion": f"{R}/v1", "kind": "RoleBinding", "namespace": "ns", "name": "b1"}]},
        "rbac": [{"serviceAccount": "ns/sa", "added": [{"scope": "Namespace", "escalation": True,
                                                         "rule": {"verbs": ["*"], "apiGroups": ["apps"], "resources": ["deployments"]}}]}],
        "images": [{"deployment": "op", "container": "m", "from": "img:1", "to": "img:2"}],
        "crds": [{"name": "ws.x.io", "change": "Updated", "versionsAdded": ["v2"], "versionsUnserved": ["v1"],
                  "storedVersionsUnserved": ["v1"]}]}
    assert compare(exact, actual, before, "Complete") == [], compare(exact, actual, before, "Complete")
    wrong = json.loads(json.dumps(exact))
    wrong["objects"]["updated"].append({"apiVersion": "v1", "kind": "ServiceAccount", "namespace": "ns", "name": "sa"})
    wrong["rbac"][0]["added"][0]["escalation"] = False
    wrong["rbac"][0]["added"][0]["scope"] = "Cluster"
    wrong["images"][0]["to"] = "img:3"
    wrong["crds"][0]["schemaChanged"] = True
    del wrong["objects"]["deleted"][1]
    got = compare(wrong, actual, before, "Complete")
    expect = ["objects.deleted: not in the preview: rbac.authorization.k8s.io/RoleBinding ns/b1",
              "objects.updated: in the preview but not updated (only its metadata changed: ownerReferences): ServiceAccount ns/sa",
              f"rbac ns/sa: added Namespace {added}: not in the preview (the preview has it with scope Cluster)",
              f"rbac ns/sa: the preview has added Cluster {added}, not so (it was added with scope Namespace)",
              f"rbac ns/sa: added Cluster {added}: escalation False, but the account's rules before did not allow it",
              "images: op/m: the preview has img:1 → img:3, it was img:1 → img:2",
              "crds ws.x.io: schemaChanged True in the preview, False"]
    assert got == expect, "\n".join(got)
    held = {("Namespace", json.dumps({"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}))}
    assert rule_covered({"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get"]}, held, "Namespace")
    assert not rule_covered({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}, held, "Cluster")
    assert not rule_covered({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}, held, "Namespace")
    assert rule_covered({"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
                        {("Cluster", json.dumps({"nonResourceURLs": ["/met*"], "verbs": ["get"]}))}, "Cluster")
    for case, *_ in TOY_CASES:
        for v in ("1.0.0", "2.0.0"):
            assert toy_csv(case, v)["spec"]["customresourcedefinitions"]["owned"][0]["name"] == toy_crd(case, v)["metadata"]["name"]
    print("self-check: ok")


# ---------------------------------------------------------------------------- main


def diff_saved(directory):
    d = Path(directory)
    plan, before, after = (json.loads((d / f"{n}.json").read_text()) for n in ("plan", "before", "after"))
    actual = actual_changes(before, after)
    impact = (plan.get("status") or {}).get("impact")
    print(json.dumps({k: v for k, v in actual.items() if v}, indent=1, default=list))
    if impact is None:
        print("no preview in plan.json")
        return
    for line in compare(impact, actual, before, (plan.get("status") or {}).get("phase")):
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("catalog_repo", nargs="?", default=str(DEFAULT_REPO),
                    help=f"checkout of community-operators-prod (holds operators/); default {DEFAULT_REPO}")
    ap.add_argument("--parts", default="edges,rollbacks", help="edges, rollbacks or both (default both)")
    ap.add_argument("--packages", help="comma-separated packages whose edges run (the catalog holds all)")
    ap.add_argument("--limit", type=int, help="run at most N edges (in package order)")
    ap.add_argument("--edges", choices=["default", "all-heads"], default="default",
                    help="the default channel's head edge per package (default), or every channel's")
    ap.add_argument("--installs-from", metavar="F", help="an install-catalog.py --json-file: only the packages "
                    "that Succeeded there on ours")
    ap.add_argument("--webhooks-on-pods", choices=["on", "off"], default="off",
                    help="run packages whose fail-closed webhook covers every Pod (default off, as install-catalog.py)")
    ap.add_argument("--prefer-mode", choices=["all", "own"], default="all",
                    help="OperatorGroup: AllNamespaces first (default, as install-catalog.py) or OwnNamespace first")
    ap.add_argument("--budget", type=float, help="start no edge after this many seconds of edges")
    ap.add_argument("--install-timeout", type=float, default=300, help="s for the older CSV to Succeed (300)")
    ap.add_argument("--plan-timeout", type=float, default=120, help="s for the upgrade plan and its preview (120)")
    ap.add_argument("--upgrade-timeout", type=float, default=300, help="s for the newer CSV alone Succeeded (300)")
    ap.add_argument("--settle-timeout", type=float, default=60, help="s for a snapshot to stop changing (60)")
    ap.add_argument("--quiet", type=float, default=5, help="s two snapshots must agree over to count as settled (5)")
    ap.add_argument("--rollback-timeout", type=float, default=180, help="s for a rollback's outcome (180)")
    ap.add_argument("--cleanup-timeout", type=float, default=120, help="s for an edge's namespaces to go (120)")
    ap.add_argument("--rollbacks-anyway", action="store_true",
                    help="run the rollback cases even when the binary has no rollbackTo (checks the toy packages "
                         "install and upgrade)")
    ap.add_argument("--nodes", type=int, default=3, help="kwok nodes (default 3)")
    ap.add_argument("--olm", help="our binary (default target/release/olm, else target/debug/olm)")
    ap.add_argument("--workdir", help="keep the rendered catalog, snapshots and logs here (reused when the inputs are the same)")
    ap.add_argument("--keep-logs", action="store_true", help="keep the temporary work directory")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    ap.add_argument("--json-file", help="also write the results as JSON to this file (after each edge)")
    ap.add_argument("--from-json", metavar="F", help="print the report of saved results")
    ap.add_argument("--diff-saved", metavar="DIR", help="compare again an edge's plan.json, before.json, after.json")
    ap.add_argument("--self-check", action="store_true", help="check the pure parts on small cases")
    args = ap.parse_args()

    if args.self_check:
        return self_check()
    if args.diff_saved:
        return diff_saved(args.diff_saved)
    if args.from_json:
        results = json.loads(Path(args.from_json).read_text())
        print(json.dumps(results, indent=1)) if args.json else report(results)
        return
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"edges", "rollbacks"}:
        ap.error("--parts: edges, rollbacks or both")

    interrupt_on_signals()
    work = Path(args.workdir).resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="olm-bench-upgrades-"))
    work.mkdir(parents=True, exist_ok=True)
    keep = bool(args.keep_logs or args.workdir)
    results, failure, bench = {"catalog_repo": str(Path(args.catalog_repo).resolve()), "edge_mode": args.edges,
                               "notes": []}, None, None

    def save():
        if args.json_file:
            Path(args.json_file).write_text(json.dumps(results, indent=1, default=list))
    try:
        picked = pick_olm(args.olm)
        # A copy: a build finishing meanwhile must not change the binary under the run.
        olm = work / "olm"
        shutil.copy2(picked, olm)
        feats = features(olm)
        results["olm"] = f"{picked} (built {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(picked.stat().st_mtime))})"
        results["features"] = feats
        log(f"olm {results['olm']}: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in feats.items()))
        serve = work / "serve"
        shutil.rmtree(serve, ignore_errors=True)
        serve.mkdir()
        edges = []
        if "edges" in parts:
            plans, dropped, docs = prepare_community(args, work, olm)
            results["dropped"] = dropped
            edges, without = select_edges(args, plans, docs)
            results["without_edges"] = without
            log(f"{len(edges)} edge(s) to run; {len(without)} package(s) without one")
            for p in plans:
                (serve / p).mkdir()
                os.link(work / "catalog" / p / "catalog.json", serve / p / "catalog.json")
        if "rollbacks" in parts:
            toys = write_toys(olm, work / "toys")
            for d in toys.iterdir():
                shutil.copytree(d, serve / d.name)
        v = subprocess.run([olm, "catalog", "validate", serve], capture_output=True, text=True)
        if v.returncode != 0:
            raise BenchError(f"olm catalog validate refuses the catalog: {ic.tail_error(v.stdout + v.stderr)}")
        bench = Bench(args, work, olm, feats)
        bench.start(serve)
        if "edges" in parts:
            results["edges"] = []
            begun = time.time()
            for i, edge in enumerate(edges):
                if args.budget and time.time() - begun > args.budget:
                    results["notes"].append(f"--budget {args.budget:g} s spent: {len(edges) - i} edge(s) not run")
                    break
                log(f"edge {i + 1}/{len(edges)}: {edge['package']} {edge['from']} → {edge['to']} ({edge['how']})")
                res = bench.run_edge(i, edge, feats)
                results["edges"].append(res)
                log(f"  {res['stage']}" + (f": {short(res['detail'], 200)}" if res["detail"] else "")
                    + (f", {len(res['differences'])} difference(s)" if res["stage"] == "compared" else "")
                    + f" ({res['seconds'].get('edge')} s)")
                save()
        if "rollbacks" in parts:
            results["rollbacks"] = []
            if not feats["rollbackTo"] and not args.rollbacks_anyway:
                results["notes"].append("rollbacks not run: the binary's Subscription CRD has no upgradePolicy.rollbackTo")
            else:
                for case, change, objects, expected in TOY_CASES:
                    log(f"rollback case {case}: 2.0.0 {change}; expected {expected}")
                    res = bench.run_rollback(case, change, objects, expected)
                    results["rollbacks"].append(res)
                    log(f"  got {res['got']}: {short(res['detail'], 200)}")
                    save()
    except BenchError as e:
        failure, keep = str(e), True
    except KeyboardInterrupt:
        failure, keep = "interrupted", True
    finally:
        ignore_signals()
        if bench is not None:
            bench.teardown()
        if keep:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    save()
    if args.json:
        print(json.dumps(results, indent=1, default=list))
    else:
        report(results)
    if failure:
        print(f"\nerror: {failure}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
