#!/usr/bin/env python3
"""Benchmark: the CSV and OperatorGroup controllers of `olm run`, with CSVs applied by hand
(no Subscription, no catalog), on a control plane of its own; part 3 also side by side with
upstream OLM v0.46.0's olm operator.

Part 1: applied → Succeeded; part 2: idle with --operators installed (and --startup); part 3:
AllNamespaces CSVs at scale, copied CSVs on and off. Method and figures: hack/bench/README.md.

Usage: hack/bench/csv.py [--parts 1,2,3] [--runs 10] [--operators 20] [--idle 60] [--startup 20]
           [--csvs 100] [--namespaces 200] [--copies both|on|off] [--side ours|upstream|both]
           [--scale-timeout 900] [--olm PATH] [--json]
       (needs `cargo build --release --bin olm`, or --olm PATH to a built one; for the
        upstream side hack/upstream-olm/build; --side upstream needs --parts 3)
"""
import argparse, collections, copy, json, os, re, shutil, socket, statistics, subprocess
import sys, tempfile, threading, time, urllib.request
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
import install as ib  # noqa: E402  (install.py's audit counting, CSV watch and upstream side)
from common import (  # noqa: E402
    BENCH_UA, REPO, UPSTREAM_VERSION, Api, BenchError, Cluster, Processes, free_port, ignore_signals,
    interrupt_on_signals, log, port_busy, rss_mib, stop, upstream_olm_paths, wait_ready,
)

BUNDLE = REPO / "bundles/reverse-words/0.3.0/manifests"
CSV_FILE = BUNDLE / "reverse-words.v0.3.0.clusterserviceversion.yaml"
CRD_FILE = BUNDLE / "apps.linuxera.org_reversewordsapps.yaml"
GLOBAL_NS = "olm"
CSV_PATH = "/apis/operators.coreos.com/v1alpha1"
BENCHES = []  # every Bench made, torn down again (idempotent) when main() ends
OBJECT_KINDS = ("clusterserviceversions", "deployments", "serviceaccounts", "roles", "rolebindings",
                "clusterroles", "clusterrolebindings")
LIST_PATHS = {
    "clusterserviceversions": f"{CSV_PATH}/clusterserviceversions",
    "deployments": "/apis/apps/v1/deployments",
    "serviceaccounts": "/api/v1/serviceaccounts",
    "roles": "/apis/rbac.authorization.k8s.io/v1/roles",
    "rolebindings": "/apis/rbac.authorization.k8s.io/v1/rolebindings",
    "clusterroles": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "clusterrolebindings": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}


def yaml_load(path):
    import yaml  # noqa: PLC0415
    return yaml.safe_load(Path(path).read_text())


def metrics(port):
    """olm run's /metrics: {name: {labels: value}} for the counters we compare."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = collections.defaultdict(dict)
    for line in text.splitlines():
        m = re.match(r"^(olm_[a-z_]+?)(?:\{(.*)\})? ([0-9.eE+-]+)$", line)
        if m and m.group(1) in ("olm_status_writes_total", "olm_reconciles_total", "olm_reconcile_failures_total"):
            out[m.group(1)][m.group(2) or ""] = float(m.group(3))
    return out


def metric_delta(before, after, name):
    if before is None or after is None:
        return None
    keys = set(before.get(name, {})) | set(after.get(name, {}))
    delta = {k: after.get(name, {}).get(k, 0) - before.get(name, {}).get(k, 0) for k in keys}
    return {"total": sum(delta.values()), "by_label": {k: v for k, v in sorted(delta.items()) if v}}


class Bench:
    """One control plane with olm run on it."""

    side = "ours"
    what = "olm run"  # the OLM process, as the report names it
    log_name = "olm-run.log"

    def __init__(self, args, workdir, label, olm_flags=(), nodes=1):
        self.args, self.label, self.olm_flags, self.nodes = args, label, list(olm_flags), nodes
        self.workdir = workdir / label
        self.workdir.mkdir()
        self.procs = Processes(self.workdir)
        self.cluster = Cluster("csvbench")
        self.olm = None
        self.olm_started = None
        self.admin = None
        self.notes = []
        BENCHES.append(self)

    def k(self, *args, stdin=None, check=True):
        return self.cluster.kubectl(*args, stdin=stdin, check=check)

    def apply(self, items):
        return self.k("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    def start_cluster(self):
        # The previous part's control plane may still be exiting after `down --clean`.
        deadline = time.time() + 60
        while any(port_busy(p) for p in self.cluster.ports()) \
                and time.time() < deadline:
            time.sleep(0.5)
        self.cluster.up()
        for i in range(1, self.nodes):  # hack/cluster/up made kwok-node-0; more for many pods
            node = f"kwok-node-{i}"
            self.apply([{"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": node, "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {"type": "kwok", "kubernetes.io/hostname": node, "kubernetes.io/os": "linux",
                           "kubernetes.io/arch": "amd64", "node-role.kubernetes.io/agent": ""}},
                "spec": {"providerID": f"kwok://{node}"}}])
        self.api = Api(self.cluster.kubeconfig, self.workdir)
        self.audit = ib.Audit(self.cluster.audit_log)
        self.k("create", "namespace", GLOBAL_NS)
        self.install_crds()

    def install_crds(self):
        crds = subprocess.run([self.args.olm, "crds"], capture_output=True, text=True, check=True).stdout
        self.k("create", "-f", "-", stdin=crds)
        self.k("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")

    def start_olm(self, name="olm-run"):
        self.admin = free_port()
        env = dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig))
        env.setdefault("RUST_LOG", "info")
        self.olm_started = time.time()
        self.olm = self.procs.spawn(name, [self.args.olm, "run", "--leader-elect=false", "--packages-address", "off",
                                           "--admin-address", f"127.0.0.1:{self.admin}", *self.olm_flags],
                                    env=env, cwd=self.workdir)
        wait_ready(self.olm, self.admin, 60)
        log(f"{self.label}: olm run ready (pid {self.olm.pid}, admin :{self.admin}, flags {self.olm_flags or 'none'})")

    def stop_olm(self):
        """SIGTERM to olm run (its own process group), SIGKILL after 10 s."""
        stop(self.olm, 10)

    def metrics(self):
        return metrics(self.admin)

    def rss(self):
        return {"rss_mib": rss_mib(self.olm.pid), "peak_rss_mib": rss_mib(self.olm.pid, "VmHWM")}

    def check_alive(self):
        self.procs.check(self.olm)

    def poke(self):
        self.api.get("/api/v1/namespaces/default")

    def wait_quiet(self, quiet=2.0, timeout=60, writes_only=False, progress=None):
        """Until OLM has made no request (or no write) for `quiet` s; returns (the time of its
        last one, whether that quiet came within `timeout`). progress(): called every 15 s."""
        deadline = time.time() + timeout
        last_report = time.time()
        while True:
            now = time.time()
            self.audit.catch_up(now, self.poke)
            recent = ib.olm_requests(self.audit.window(now - max(quiet, 30), now + 60))
            if writes_only:
                recent = [r for r in recent if r[1] in ib.WRITE_VERBS]
            last = max((r[0] for r in recent), default=None)
            if last is None or last < now - quiet:
                return last, True
            if time.time() > deadline:
                log(f"{self.label}: warning: OLM still busy after {timeout:g} s; going on")
                return last, False
            self.check_alive()
            if progress and time.time() - last_report > 15:
                progress()
                last_report = time.time()
            time.sleep(max(0.2, last + quiet - time.time()))

    def olm_log_problems(self, limit=8):
        """WARN/ERROR lines of the OLM process's log (ANSI colours stripped), first few and a
        count: ours' tracing levels, and upstream's logrus (level=warning|error|fatal), klog
        (E…/W… prefixes) and controller-runtime ones."""
        try:
            text = (self.workdir / self.log_name).read_text(errors="replace")
        except FileNotFoundError:
            return {"count": 0, "lines": []}
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in text.splitlines()]
        bad = [ln for ln in lines
               if re.search(r"\b(WARN|ERROR)\b|\blevel=(warning|error|fatal|panic)\b|^[EWF]\d{4} ", ln)]
        return {"count": len(bad), "lines": bad[:limit]}

    def teardown(self):
        self.procs.stop_all()
        self.cluster.down()


class UpstreamBench(Bench):
    """One control plane with upstream OLM's olm operator on it, as install.py runs it
    (hack/upstream-olm/build's binary as a local process, global namespace `olm`, upstream's
    CRDs), plus the OLMConfig `cluster` upstream's chart creates. Its catalog operator is not
    started: no Subscription, InstallPlan or CatalogSource is used, and the olm operator
    waits for nothing of it."""

    side = "upstream"
    what = f"upstream olm {UPSTREAM_VERSION}"
    log_name = "olm.log"

    def __init__(self, args, workdir, label, paths, copies, nodes=1):
        super().__init__(args, workdir, label, (), nodes)
        self.bin, self.crds = paths
        self.copies = copies
        self.olm_pids = {}

    def install_crds(self):
        ib.Upstream.install_crds(self)
        # Before OLM starts; disableCopiedCSVs is upstream's --disable-copied-csvs.
        self.k("create", "-f", "-", stdin=json.dumps({
            "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "metadata": {"name": "cluster"},
            "spec": {} if self.copies else {"features": {"disableCopiedCSVs": True}}}))

    def start_olm(self, name="olm"):
        self.olm_started = time.time()
        ib.Upstream.start_operators(self, catalog=False)
        self.olm = next(p for p in self.procs.procs if p.pid == self.olm_pids["olm"])
        log(f"{self.label}: {self.what} started (pid {self.olm.pid}; copied CSVs "
            f"{'on' if self.copies else 'off: OLMConfig cluster spec.features.disableCopiedCSVs'})")

    def check_alive(self):
        for proc in self.procs.procs:
            self.procs.check(proc)

    def metrics(self):
        return None  # upstream's /metrics is on a hard-coded :8080; its counters are not ours anyway


def csv_create_time(audit, namespace=None, name=None):
    times = [r[0] for r in audit.requests.values()
             if r[1] == "create" and r[3] == "clusterserviceversions" and r[2].startswith("kubectl")
             and (namespace is None or r[4] == namespace) and (name is None or r[5] == name)]
    return min(times) if times else None


def created_objects(records):
    """OLM's requests answered 201 (create, or apply that created), per resource."""
    out = collections.Counter(r[3] for r in ib.olm_requests(records) if r[6] == 201)
    return dict(sorted(out.items()))


def count_objects(api):
    """Objects per kind, listed as metadata only (cheap for thousands of copies)."""
    out = {}
    for kind, path in LIST_PATHS.items():
        total, cont = 0, ""
        while True:
            c = api.conn(timeout=120)
            try:
                c.request("GET", f"{path}?limit=5000" + (f"&continue={cont}" if cont else ""), headers={
                    "User-Agent": BENCH_UA,
                    "Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"})
                r = c.getresponse()
                body = json.loads(r.read())
            finally:
                c.close()
            if r.status != 200:
                raise BenchError(f"list {path}: {r.status}")
            items = body.get("items") or []
            total += len(items)
            if kind == "clusterserviceversions":
                out["copied csvs"] = out.get("copied csvs", 0) + sum(
                    1 for i in items if "olm.copiedFrom" in ((i.get("metadata") or {}).get("labels") or {}))
            cont = (body.get("metadata") or {}).get("continue")
            if not cont:
                break
        out[kind] = total
    return out


class SourceCsvWatch(threading.Thread):
    """Watches CSVs in all namespaces that are not copies; records the first time each
    (namespace, name) is seen in each phase."""

    def __init__(self, api):
        super().__init__(daemon=True)
        self.api = api
        self.seen = {}  # (ns, name) -> {phase: time}
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.error = None
        self.stop = False
        self.conn = None

    def run(self):
        base = f"{CSV_PATH}/clusterserviceversions?labelSelector=%21olm.copiedFrom"
        try:
            listing = self.api.get(base)
            for item in listing.get("items", []):
                self.saw(item)
            rv = listing["metadata"]["resourceVersion"]
            while not self.stop:
                c = self.api.conn(timeout=10)
                c.request("GET", f"{base}&watch=1&timeoutSeconds=1800&resourceVersion={rv}",
                          headers={"User-Agent": BENCH_UA, "Accept": "application/json"})
                r = c.getresponse()
                if r.status != 200:
                    raise BenchError(f"watch CSVs: {r.status}")
                c.sock.settimeout(None)
                self.conn = c
                self.ready.set()
                while not self.stop:
                    line = r.readline()
                    if not line:
                        break
                    ev = json.loads(line)
                    if ev.get("type") == "ERROR":
                        raise BenchError(f"watch CSVs: {ev}")
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        self.saw(ev["object"])
                        rv = ev["object"]["metadata"]["resourceVersion"]
        except Exception as e:  # noqa: BLE001
            if not self.stop:
                self.error = e
            self.ready.set()

    def saw(self, csv):
        now = time.time()
        phase = (csv.get("status") or {}).get("phase")
        key = (csv["metadata"]["namespace"], csv["metadata"]["name"])
        with self.lock:
            phases = self.seen.setdefault(key, {})
            if phase and phase not in phases:
                phases[phase] = now

    def succeeded(self, keys):
        with self.lock:
            return {k: self.seen.get(k, {}).get("Succeeded") for k in keys}

    def close(self):
        self.stop = True
        if self.conn is not None:
            try:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.conn.close()


def wait_all_succeeded(bench, watch, keys, timeout, what, partial=False):
    """When the last of `keys` was seen Succeeded; after `timeout` s an error, or None when
    `partial` (the watch then holds what was reached)."""
    deadline = time.time() + timeout
    last_report = time.time()
    while True:
        done = watch.succeeded(keys)
        if all(done.values()):
            return max(done.values())
        if watch.error:
            raise BenchError(f"watch on CSVs failed: {watch.error}")
        bench.check_alive()
        if time.time() > deadline:
            missing = [f"{ns}/{n}" for (ns, n), t in done.items() if not t]
            if partial:
                log(f"{bench.label}: {len(missing)} of {len(keys)} CSVs not Succeeded after {timeout:g} s")
                return None
            with watch.lock:
                phases = collections.Counter(max(watch.seen.get(k, {"none": 0}).items(), key=lambda x: x[1])[0]
                                             for k in keys if not done[k])
            raise BenchError(f"{what}: {len(missing)} of {len(keys)} CSVs not Succeeded after {timeout:g} s "
                             f"(last phases: {dict(phases)}; e.g. {missing[:5]})")
        if time.time() - last_report > 15:
            log(f"{bench.label}: {sum(1 for t in done.values() if t)}/{len(keys)} CSVs Succeeded")
            last_report = time.time()
        time.sleep(0.2)


def own_namespace_items(ns):
    """A namespace, its OwnNamespace group, and the RBAC the CSV's accounts need (OLM grants
    a hand-applied CSV nothing: an admin makes it, as a plan would, before the clock)."""
    csv = yaml_load(CSV_FILE)
    csv["metadata"]["namespace"] = ns
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            {"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
             "metadata": {"name": "bench", "namespace": ns}, "spec": {"targetNamespaces": [ns]}},
            *plan_rbac(csv)]


def wait_groups(bench, namespaces, expect, timeout=120):
    """Until every OperatorGroup `bench` in `namespaces` has status.namespaces == expect(ns)."""
    want = set(namespaces)

    def done():
        groups = bench.api.get("/apis/operators.coreos.com/v1/operatorgroups")["items"]
        ok = {g["metadata"]["namespace"] for g in groups
              if g["metadata"]["namespace"] in want
              and (g.get("status") or {}).get("namespaces") == expect(g["metadata"]["namespace"])}
        return ok == want
    try:
        bench.api.poll(f"{bench.label}: status.namespaces of {len(want)} OperatorGroups", timeout, done, 0.2)
    except BenchError as e:
        groups = bench.api.get("/apis/operators.coreos.com/v1/operatorgroups")["items"]
        bad = [f"{g['metadata']['namespace']}: {json.dumps(g.get('status'))}" for g in groups
               if g["metadata"]["namespace"] in want
               and (g.get("status") or {}).get("namespaces") != expect(g["metadata"]["namespace"])]
        raise BenchError(f"{e}; e.g. {bad[:3]}") from None


# ---------------------------------------------------------------------------- parts 1 and 2


def parts_1_2(args, workdir, parts):
    bench = Bench(args, workdir, "own-namespace")
    result = {}
    try:
        bench.start_cluster()
        bench.k("create", "-f", CRD_FILE)
        bench.k("wait", "--for=condition=Established", "crd", "reversewordsapps.apps.linuxera.org", "--timeout=60s")
        bench.start_olm()
        csv_name = yaml_load(CSV_FILE)["metadata"]["name"]
        runs = []
        n_first = args.runs if 1 in parts else 0
        for i in range(n_first):
            ns = f"csvbench-{i}"
            bench.apply(own_namespace_items(ns))
            wait_groups(bench, [ns], lambda n: [n], 30)
            bench.wait_quiet()
            watch = ib.CsvWatch(bench.api, ns)
            watch.start()
            if not watch.ready.wait(30) or watch.error:
                raise BenchError(f"watch on CSVs in {ns} failed: {watch.error}")
            launched = time.time()
            bench.k("apply", "-n", ns, "-f", CSV_FILE)
            applied = time.time()
            deadline = launched + args.timeout
            while not watch.succeeded.wait(0.5):
                bench.check_alive()
                if time.time() > deadline:
                    break
            watch.close()
            if "Succeeded" not in watch.phases:
                seen = ", ".join(f"{p} at +{t - launched:.2f}s" for p, (t, _) in watch.phases.items()) or "no CSV"
                raise BenchError(f"{ns}/{csv_name} not Succeeded in {args.timeout:g} s (seen: {seen})")
            succeeded_at = watch.phases["Succeeded"][0]
            bench.audit.catch_up(succeeded_at, bench.poke)
            created = csv_create_time(bench.audit, ns, csv_name)
            if created is None:
                raise BenchError(f"the CSV create in {ns} is not in the audit log")
            during = ib.summarize(bench.audit.window(created, succeeded_at))
            run = {"namespace": ns, "seconds": succeeded_at - created, "seconds_from_kubectl": succeeded_at - launched,
                   "kubectl_apply_seconds": applied - launched,
                   "phases": {p: round(t - created, 4) for p, (t, _) in watch.phases.items()},
                   "requests": during["requests"], "writes": during["writes"],
                   "by_agent_verb": during["by_agent_verb"]}
            runs.append(run)
            log(f"run {i + 1}/{args.runs}: {ns}/{csv_name} Succeeded {run['seconds']:.3f} s after the create "
                f"({run['seconds_from_kubectl']:.3f} s after launching kubectl); {during['requests']} requests, "
                f"{during['writes']} writes")
        if runs:
            secs = [r["seconds"] for r in runs]
            result["part1"] = {"runs": runs, "median": statistics.median(secs), "min": min(secs), "max": max(secs),
                               "median_from_kubectl": statistics.median(r["seconds_from_kubectl"] for r in runs),
                               "median_requests": statistics.median(r["requests"] for r in runs),
                               "median_writes": statistics.median(r["writes"] for r in runs)}
        if 2 in parts:
            result["part2"] = idle_part(args, bench, n_first)
            if args.startup:
                result["part2"]["startup"] = startup_part(args, bench)
        result["olm_log"] = bench.olm_log_problems()
        result["notes"] = bench.notes
    finally:
        bench.teardown()
    return result


def idle_part(args, bench, have):
    more = [f"csvbench-{i}" for i in range(have, max(have, args.operators))]
    csv_name = yaml_load(CSV_FILE)["metadata"]["name"]
    if more:
        log(f"part 2: installing {len(more)} more operators ({args.operators} in all)")
        bench.apply([item for ns in more for item in own_namespace_items(ns)])
        wait_groups(bench, more, lambda n: [n])
        watch = SourceCsvWatch(bench.api)
        watch.start()
        if not watch.ready.wait(30) or watch.error:
            raise BenchError(f"watch on CSVs failed: {watch.error}")
        for ns in more:
            bench.k("apply", "-n", ns, "-f", CSV_FILE)
        keys = [(f"csvbench-{i}", csv_name) for i in range(args.operators)]
        last = wait_all_succeeded(bench, watch, keys, args.scale_timeout, "part 2")
        watch.close()
    else:
        last = time.time()
    log(f"part 2: {args.operators} operators Succeeded; {args.settle:g} s to settle, then {args.idle:g} s idle")
    idle_start = max(time.time(), last + args.settle)
    while time.time() < idle_start:
        bench.check_alive()
        time.sleep(0.2)
    m0, rss0 = bench.metrics(), bench.rss()
    idle_end = idle_start + args.idle
    while time.time() < idle_end:
        bench.check_alive()
        time.sleep(min(1.0, max(0.0, idle_end - time.time())))
    m1, rss1 = bench.metrics(), bench.rss()
    bench.audit.catch_up(idle_end, bench.poke)
    settle = ib.summarize(bench.audit.window(last, idle_start))
    idle = ib.summarize(bench.audit.window(idle_start, idle_end))
    return {"operators": args.operators, "idle_seconds": args.idle, "settle_seconds": round(idle_start - last, 2),
            "rss_before_idle": rss0, "rss_after_idle": rss1,
            "status_writes": metric_delta(m0, m1, "olm_status_writes_total"),
            "reconciles": metric_delta(m0, m1, "olm_reconciles_total"),
            "idle": idle, "settle": settle}


def startup_part(args, bench):
    """Restarts olm run (the operators installed) and counts its requests in its first
    --startup s, by verb and resource; lists and watches of one namespace name it."""
    log(f"part 2: restarting olm run; counting its requests in its first {args.startup:g} s")
    bench.stop_olm()
    bench.start_olm("olm-run-restarted")
    start = bench.olm_started
    ready = time.time() - start
    end = start + args.startup
    while time.time() < end:
        bench.check_alive()
        time.sleep(min(0.5, max(0.0, end - time.time())))
    rss = bench.rss()
    bench.audit.catch_up(end, bench.poke)
    mine = ib.olm_requests(bench.audit.window(start, end))
    by = collections.Counter((r[1], r[3] + (f" ns={r[4]}" if r[4] and r[1] in ("list", "watch") else ""))
                             for r in mine)
    return {"seconds": args.startup, "ready_seconds": round(ready, 3), "rss": rss, "requests": len(mine),
            "writes": sum(1 for r in mine if r[1] in ib.WRITE_VERBS),
            "by_verb": dict(sorted(collections.Counter(r[1] for r in mine).items())),
            "by_verb_resource": {f"{v} {res}": n for (v, res), n in sorted(by.items())}}


# ---------------------------------------------------------------------------- part 3


def all_namespaces_objects(n, shared_crd):
    """The CRDs (unless shared) and CSVs of part 3: bench-N.v0.1.0 in bench-op-N."""
    base_csv, base_crd = yaml_load(CSV_FILE), yaml_load(CRD_FILE)
    crds, csvs = [], []
    if shared_crd:
        crds.append(base_crd)
    for i in range(n):
        csv = copy.deepcopy(base_csv)
        csv["metadata"]["name"] = f"bench-{i}.v0.1.0"
        csv["metadata"]["namespace"] = f"bench-op-{i}"
        spec = csv["spec"]
        spec.pop("replaces", None)
        spec.pop("skips", None)
        spec["version"] = "0.1.0"
        spec["installModes"] = [{"type": t, "supported": True}
                                for t in ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")]
        if not shared_crd:
            group = f"bench{i}.linuxera.org"
            crd = copy.deepcopy(base_crd)
            crd["metadata"]["name"] = f"reversewordsapps.{group}"
            crd["spec"]["group"] = group
            crds.append(crd)
            spec["customresourcedefinitions"]["owned"][0]["name"] = crd["metadata"]["name"]
            csv["metadata"]["annotations"]["alm-examples"] = json.dumps(
                [{"apiVersion": f"{group}/v1alpha1", "kind": "ReverseWordsApp", "metadata": {"name": "example"},
                  "spec": {"replicas": 1}}])
            for perm in spec["install"]["spec"]["permissions"]:
                for rule in perm["rules"]:
                    rule["apiGroups"] = [group if g == "apps.linuxera.org" else g for g in rule["apiGroups"]]
        csvs.append(csv)
    return crds, csvs


def plan_rbac(csv):
    """What upstream's InstallPlan would have made for a CSV before its olm operator installs
    it (its olm operator does not make a CSV's RBAC): the ServiceAccounts of the CSV's
    permissions, a Role and RoleBinding per permission and a ClusterRole and
    ClusterRoleBinding per cluster permission, labelled as OLM's: olm.managed (upstream's RBAC
    informers see only those) and olm.owner* naming the CSV (what its AllNamespaces lift of
    Roles to same-named ClusterRoles looks for)."""
    ns, name = csv["metadata"]["namespace"], csv["metadata"]["name"]
    labels = {"olm.managed": "true", "olm.owner": name, "olm.owner.kind": "ClusterServiceVersion",
              "olm.owner.namespace": ns}
    strategy = csv["spec"]["install"]["spec"]
    items, accounts = [], set()
    for cluster, perms in ((False, strategy.get("permissions") or []), (True, strategy.get("clusterPermissions") or [])):
        for i, perm in enumerate(perms):
            sa = perm["serviceAccountName"]
            if sa not in accounts:
                accounts.add(sa)
                items.append({"apiVersion": "v1", "kind": "ServiceAccount",
                              "metadata": {"name": sa, "namespace": ns, "labels": labels}})
            kind = "ClusterRole" if cluster else "Role"
            meta = {"name": f"{name}-{'cluster-' if cluster else ''}{i}", "labels": labels}
            if not cluster:
                meta["namespace"] = ns
            items.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
                          "rules": perm["rules"]})
            items.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind + "Binding", "metadata": meta,
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": meta["name"]},
                          "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})
    return items


def copies_created(audit):
    """Copied CSVs OLM created so far, from the audit log (OLM's CSV requests answered 201:
    the CSVs themselves are created by kubectl)."""
    return sum(1 for r in ib.olm_requests(audit.requests.values()) if r[3] == "clusterserviceversions" and r[6] == 201)


def part_3(args, workdir, copies, side="ours", upstream=None):
    label = f"all-namespaces-copies-{'on' if copies else 'off'}" + ("" if side == "ours" else "-upstream")
    nodes = 1 + (args.csvs + 99) // 100
    if side == "ours":
        bench = Bench(args, workdir, label, [] if copies else ["--disable-copied-csvs"], nodes=nodes)
    else:
        bench = UpstreamBench(args, workdir, label, upstream, copies, nodes=nodes)
    try:
        bench.start_cluster()
        crds, csvs = all_namespaces_objects(args.csvs, args.shared_crd)
        op_ns = [f"bench-op-{i}" for i in range(args.csvs)]
        plain = [f"bench-ns-{i}" for i in range(max(0, args.namespaces - args.csvs))]
        log(f"{label}: {len(crds)} CRDs, {len(op_ns)} operator namespaces + {len(plain)} plain ones")
        for i in range(0, len(crds), 50):
            bench.k("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds[i:i + 50]}))
        bench.k("wait", "--for=condition=Established", "crd", "--all", "--timeout=300s")
        if not args.groups_before_olm:
            bench.start_olm()
        bench.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in op_ns + plain])
        bench.apply([{"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                      "metadata": {"name": "bench", "namespace": ns}, "spec": {}} for ns in op_ns])
        rbac = [item for csv in csvs for item in plan_rbac(csv)]
        for i in range(0, len(rbac), 300):
            bench.apply(rbac[i:i + 300])
        bench.notes.append(
            "each CSV's ServiceAccount, Role and RoleBinding were made beforehand by the bench, labelled as "
            "OLM's, as an InstallPlan would (neither side grants a hand-applied CSV anything: it stays "
            "Pending without them); each lifts them to ClusterRoles for AllNamespaces")
        if args.groups_before_olm:
            bench.start_olm()
        wait_groups(bench, op_ns, lambda n: [""], 120)
        bench.wait_quiet(timeout=120)
        namespaces_total = len(bench.api.get("/api/v1/namespaces")["items"])
        before = count_objects(bench.api)
        m0 = bench.metrics()
        watch = SourceCsvWatch(bench.api)
        watch.start()
        if not watch.ready.wait(30) or watch.error:
            raise BenchError(f"watch on CSVs failed: {watch.error}")
        rss_start = bench.rss()
        log(f"{label}: applying {len(csvs)} CSVs ({namespaces_total} namespaces; RSS {rss_start['rss_mib']:.1f} MiB)")
        launched = time.time()
        deadline = launched + args.scale_timeout  # for all Succeeded and OLM's last write alike
        bench.k("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": csvs}))
        keys = [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in csvs]
        all_succeeded = wait_all_succeeded(bench, watch, keys, args.scale_timeout, label, partial=True)
        rss_peak_sample, last_write, quiet = None, None, False
        if all_succeeded is not None:
            log(f"{label}: all {len(keys)} CSVs Succeeded {all_succeeded - launched:.1f} s after launching kubectl; "
                f"waiting for OLM to stop writing ({args.quiet:g} s)")
            rss_peak_sample = bench.rss()

            def progress():
                log(f"{label}: OLM still writing; {copies_created(bench.audit)} copied CSVs created so far")
            last_write, quiet = bench.wait_quiet(args.quiet, timeout=max(0.0, deadline - time.time()) + args.quiet,
                                                 writes_only=True, progress=progress)
            quiet = quiet and (last_write is None or last_write <= deadline)
        watch.close()
        rss_end = bench.rss()
        m1 = bench.metrics()
        # Listed before the window ends: when not converged, what is listed was counted too.
        after = count_objects(bench.api)
        ended = time.time()
        bench.audit.catch_up(ended, bench.poke)
        first_create = csv_create_time(bench.audit)
        if first_create is None:
            raise BenchError("no CSV create in the audit log")
        converged = max(last_write or all_succeeded, all_succeeded) if quiet else None
        window = bench.audit.window(first_create, (converged or ended) + 0.001)
        summary = ib.summarize(window)
        expected_copies = 0 if not copies else len(csvs) * (namespaces_total - 1)
        succ_times = sorted(t - first_create for t in watch.succeeded(keys).values() if t)
        res = {
            "side": side, "copies": copies, "csvs": len(csvs), "namespaces": namespaces_total,
            "shared_crd": args.shared_crd, "csvs_succeeded": len(succ_times),
            "seconds_all_succeeded": None if all_succeeded is None else all_succeeded - first_create,
            "seconds_first_succeeded": succ_times[0] if succ_times else None,
            "seconds_median_succeeded": statistics.median(succ_times) if succ_times else None,
            "seconds_converged": None if converged is None else converged - first_create,
            "not_converged": None,
            "kubectl_apply_seconds": None,
            "rss_before": rss_start, "rss_at_all_succeeded": rss_peak_sample, "rss_converged": rss_end,
            "requests": summary["requests"], "writes": summary["writes"],
            "by_agent_verb": summary["by_agent_verb"],
            "created_by_olm": created_objects(window),
            "objects_before": before, "objects_after": after,
            "objects_delta": {k: after[k] - before.get(k, 0) for k in after},
            "expected_copies": expected_copies,
            "status_writes": metric_delta(m0, m1, "olm_status_writes_total"),
            "reconciles": metric_delta(m0, m1, "olm_reconciles_total"),
            "reconcile_failures": metric_delta(m0, m1, "olm_reconcile_failures_total"),
            "olm_log": bench.olm_log_problems(),
            "notes": bench.notes,
        }
        if converged is None:
            res["not_converged"] = {
                "within_seconds": args.scale_timeout,
                "stage": "CSVs Succeeded" if all_succeeded is None else "OLM's writes",
                "csvs_succeeded": len(succ_times), "copied_csvs_listed": after.get("copied csvs", 0),
                "seconds_observed": ended - first_create}
            log(f"{label}: not converged within {args.scale_timeout:g} s: {len(succ_times)}/{len(csvs)} CSVs "
                f"Succeeded, {after.get('copied csvs', 0)} of {expected_copies} copied CSVs; {res['writes']} writes "
                f"so far, RSS {rss_end['rss_mib']:.1f} MiB (peak {rss_end['peak_rss_mib']:.1f})")
        else:
            log(f"{label}: converged {res['seconds_converged']:.1f} s after the first create; "
                f"{res['writes']} writes, RSS {rss_end['rss_mib']:.1f} MiB (peak {rss_end['peak_rss_mib']:.1f})")
        if after.get("copied csvs", 0) != expected_copies:
            res["notes"].append(f"copied CSVs: {after.get('copied csvs', 0)} listed, {expected_copies} expected")
        if args.keep_logs:
            shutil.copy(bench.cluster.audit_log, bench.workdir / "audit.log")
        return res
    finally:
        bench.teardown()


# ---------------------------------------------------------------------------- report


def fmt(v, unit=""):
    if v is None:
        return "—"
    if unit == "s":
        return f"{v:.3f} s"
    if unit == "MiB":
        return f"{v:.1f} MiB"
    return f"{v:g}" if isinstance(v, (int, float)) else str(v)


def table(rows):
    w0 = max(len(r[0]) for r in rows)
    widths = [max(len(r[i]) for r in rows if len(r) > i) for i in range(max(len(r) for r in rows))]
    for r in rows:
        print("  " + r[0].ljust(w0) + "".join("  " + c.rjust(widths[i + 1]) for i, c in enumerate(r[1:])))


def report(res, args):
    if (res.get("args") or {}).get("side", "ours") != "upstream":
        print(f"\nolm run: {res.get('olm_binary')}")
    if res.get("upstream_olm"):
        print(f"{'' if res.get('all_namespaces') else chr(10)}upstream olm {UPSTREAM_VERSION}: {res['upstream_olm']}")
    p1 = (res.get("own") or {}).get("part1")
    if p1:
        print(f"\n1. CSV applied → Succeeded (reverse-words 0.3.0, OwnNamespace, {len(p1['runs'])} runs)")
        print("   from the API server receiving the CSV create (audit log) to Succeeded on a watch")
        table([["median", fmt(p1["median"], "s")], ["fastest", fmt(p1["min"], "s")],
               ["slowest", fmt(p1["max"], "s")], ["median incl. kubectl apply", fmt(p1["median_from_kubectl"], "s")],
               ["OLM requests per install (median)", fmt(p1["median_requests"])],
               ["  of which writes", fmt(p1["median_writes"])]])
        print("   times: " + ", ".join(f"{r['seconds']:.3f}" for r in p1["runs"]) + " s")
        print("   phases seen (s after the create, last run): "
              + ", ".join(f"{p} {t:.3f}" for p, t in p1["runs"][-1]["phases"].items()))
        print("   requests of the last install: " + ", ".join(f"{k} {n}" for k, n in p1["runs"][-1]["by_agent_verb"].items()))
    p2 = (res.get("own") or {}).get("part2")
    if p2:
        print(f"\n2. {p2['operators']} operators installed, {p2['idle_seconds']:g} s idle "
              f"(after {p2['settle_seconds']:g} s to settle)")
        table([["RSS of olm run before / after idle",
                f"{fmt(p2['rss_before_idle']['rss_mib'], 'MiB')} / {fmt(p2['rss_after_idle']['rss_mib'], 'MiB')}"],
               ["  peak (VmHWM)", fmt(p2["rss_after_idle"]["peak_rss_mib"], "MiB")],
               ["status writes (olm_status_writes_total delta)", fmt(p2["status_writes"]["total"])],
               ["writes in the audit log (OLM's user agents)", fmt(p2["idle"]["writes"])],
               ["requests in the audit log (OLM's user agents)", fmt(p2["idle"]["requests"])],
               ["reconciles (olm_reconciles_total delta)", fmt(p2["reconciles"]["total"])],
               ["requests / writes while settling", f"{p2['settle']['requests']} / {p2['settle']['writes']}"]])
        print("   idle requests by client and verb: " + (", ".join(f"{k} {n}" for k, n in p2["idle"]["by_agent_verb"].items()) or "none"))
        if p2["idle"]["writes_detail"]:
            print("   WRITES WHILE IDLE: " + ", ".join(f"{k} ×{n}" for k, n in p2["idle"]["writes_detail"].items()))
        if p2["reconciles"]["by_label"]:
            print("   idle reconciles: " + ", ".join(f"{k} {v:g}" for k, v in p2["reconciles"]["by_label"].items()))
        print(f"   zero writes while idle: {'met' if p2['idle']['writes'] == 0 and p2['status_writes']['total'] == 0 else 'NOT met'}")
        st = p2.get("startup")
        if st:
            print(f"\n   olm run restarted with the {p2['operators']} operators: its requests in its first {st['seconds']:g} s"
                  f" (ready after {st['ready_seconds']:.1f} s; RSS then {fmt(st['rss']['rss_mib'], 'MiB')})")
            per = {}
            for key, n in st["by_verb_resource"].items():
                verb, resource = key.split(" ", 1)
                per.setdefault(resource, collections.Counter())[verb if verb in ("list", "watch") else "other"] += n
            rows = [["resource", "list", "watch", "other"]]
            rows += [[r, *(str(c[v]) for v in ("list", "watch", "other"))] for r, c in sorted(per.items())]
            rows.append(["total", *(str(sum(c[v] for c in per.values())) for v in ("list", "watch", "other"))])
            table(rows)
            print(f"   {st['requests']} requests, {st['writes']} writes; by verb: "
                  + ", ".join(f"{v} {n}" for v, n in st["by_verb"].items()))
    report_part_3(res, args)
    p3 = res.get("all_namespaces") or {}
    up3 = res.get("upstream_all_namespaces") or {}
    logs = [("own-namespace", res.get("own")), *((f"copies {m}", v) for m, v in p3.items()),
            *((f"upstream, copies {m}", v) for m, v in up3.items())]
    for key, r in logs:
        if r and r.get("olm_log", {}).get("count"):
            who = "upstream olm" if key.startswith("upstream") else "olm run"
            print(f"\n{who} log ({key.removeprefix('upstream, ')}): {r['olm_log']['count']} WARN/ERROR lines, first ones:")
            for ln in r["olm_log"]["lines"]:
                print("   " + ln[:400])


def part_3_rows(args, runs):
    """(label, value of a run, unit, ratio shown) for part 3's table; `runs` are the results
    it shows (for the kinds of objects created)."""
    def total(key):
        return lambda r: (r.get(key) or {}).get("total")

    def writes_per_copy(r):
        n = (r.get("objects_delta") or {}).get("copied csvs", 0)
        return r["writes"] / n if n else None
    rows = [
        ("CSVs Succeeded", lambda r: r.get("csvs_succeeded", r["csvs"]), "", False),
        ("all CSVs Succeeded (s after the first create)", lambda r: r["seconds_all_succeeded"], "timed", True),
        ("  first CSV Succeeded", lambda r: r["seconds_first_succeeded"], "s", True),
        ("  median CSV Succeeded", lambda r: r["seconds_median_succeeded"], "s", True),
        (f"converged (last OLM write, then {args.quiet:g} s without)", lambda r: r["seconds_converged"], "timed", True),
        ("RSS of OLM before the CSVs", lambda r: r["rss_before"]["rss_mib"], "MiB", True),
        ("RSS at all Succeeded", lambda r: (r["rss_at_all_succeeded"] or {}).get("rss_mib"), "MiB", True),
        ("RSS converged (or at the timeout)", lambda r: r["rss_converged"]["rss_mib"], "MiB", True),
        ("peak RSS (VmHWM)", lambda r: r["rss_converged"]["peak_rss_mib"], "MiB", True),
        ("OLM requests until converged (or the timeout)", lambda r: r["requests"], "", True),
        ("  of which writes", lambda r: r["writes"], "", True),
        ("  writes per copied CSV", writes_per_copy, "per", True),
        ("status writes (metric)", total("status_writes"), "", False),
        ("reconciles (metric)", total("reconciles"), "", False),
        ("reconcile failures (metric)", total("reconcile_failures"), "", False),
    ]
    for k in sorted({k for r in runs for k in r["created_by_olm"]}):
        rows.append((f"created by OLM: {k}", lambda r, k=k: r["created_by_olm"].get(k, 0), "", True))
    for k in ("clusterserviceversions", "copied csvs", *OBJECT_KINDS[1:]):
        rows.append((f"objects added: {k}", lambda r, k=k: r["objects_delta"].get(k, 0), "", True))
    rows.append(("copied CSVs expected", lambda r: r["expected_copies"], "", False))
    return rows


def report_part_3(res, args):
    """Part 3's table: one column per copies mode for one side; with both sides, one table per
    mode, upstream and ours side by side with upstream/ours."""
    by_side = {"upstream": res.get("upstream_all_namespaces") or {}, "ours": res.get("all_namespaces") or {}}
    sides = [s for s in ("upstream", "ours") if by_side[s]]
    if not sides:
        return
    names = {"upstream": f"upstream {UPSTREAM_VERSION}", "ours": "olm-rs"}
    modes = [m for m in ("on", "off") if any(m in by_side[s] for s in sides)]
    any3 = next(by_side[s][m] for s in sides for m in modes if m in by_side[s])
    only = {"upstream": f": upstream OLM {UPSTREAM_VERSION} (olm operator)", "ours": ": olm run"}
    print(f"\n3. {any3['csvs']} CSVs in AllNamespaces mode, {any3['namespaces']} namespaces in the cluster"
          f" ({'one shared CRD' if any3['shared_crd'] else 'one CRD each'})" + ("" if len(sides) == 2 else only[sides[0]]))

    def cell(r, fn, unit):
        if r is None:
            return "—"
        v = fn(r)
        if unit == "timed":  # a time the run did not reach: its timeout
            nc = r.get("not_converged")
            return f"> {nc['within_seconds']:g} s" if v is None and nc else fmt(v, "s")
        return f"{v:.1f}" if unit == "per" and v is not None else fmt(v, unit)

    def ratio(up, ours, fn, unit):
        a, b = (None if up is None else fn(up)), (None if ours is None else fn(ours))
        if unit == "timed" and a is None and b and up and up.get("not_converged"):
            return f"> {up['not_converged']['within_seconds'] / b:.1f}x"
        return ib.ratio(a, b)
    if len(sides) == 1:
        runs = [by_side[sides[0]][m] for m in modes]
        rows = [["", *(f"copies {m}" for m in modes)]]
        rows += [[label, *(cell(r, fn, unit) for r in runs)] for label, fn, unit, _ in part_3_rows(args, runs)]
        table(rows)
    else:
        for m in modes:
            up, ours = by_side["upstream"].get(m), by_side["ours"].get(m)
            print(f"   copies {m}:")
            rows = [["", names["upstream"], names["ours"], "upstream/ours"]]
            for label, fn, unit, show_ratio in part_3_rows(args, [r for r in (up, ours) if r]):
                rows.append([label, cell(up, fn, unit), cell(ours, fn, unit),
                             ratio(up, ours, fn, unit) if show_ratio else ""])
            table(rows)
    for s in sides:
        for m in modes:
            r = by_side[s].get(m)
            if not r:
                continue
            who = f"{names[s]}, copies {m}" if len(sides) == 2 else f"copies {m}"
            nc = r.get("not_converged")
            if nc:
                print(f"   {who}: NOT CONVERGED within {nc['within_seconds']:g} s (waiting for {nc['stage']}): "
                      f"{nc['csvs_succeeded']}/{r['csvs']} CSVs Succeeded, {nc['copied_csvs_listed']} of "
                      f"{r['expected_copies']} copied CSVs listed after {nc['seconds_observed']:.0f} s; the figures "
                      "above are what was reached then")
            for note in r.get("notes", []):
                print(f"   note ({who}): {note}")
            if (r.get("reconcile_failures") or {}).get("by_label"):
                print(f"   reconcile failures ({who}): " + ", ".join(
                    f"{k} {v:g}" for k, v in r["reconcile_failures"]["by_label"].items()))


# ---------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="1,2,3", help="which parts to run (default 1,2,3)")
    ap.add_argument("--runs", type=int, default=10, help="part 1: installs timed (default 10)")
    ap.add_argument("--operators", type=int, default=20, help="part 2: operators installed while idle (default 20)")
    ap.add_argument("--idle", type=float, default=60, help="part 2: idle seconds (default 60)")
    ap.add_argument("--settle", type=float, default=15, help="part 2: seconds after the last Succeeded before idle (default 15)")
    ap.add_argument("--startup", type=float, default=0,
                    help="part 2: then restart olm run and count its requests in its first this many seconds (default 0: no restart)")
    ap.add_argument("--csvs", type=int, default=100, help="part 3: AllNamespaces CSVs (default 100)")
    ap.add_argument("--namespaces", type=int, default=200, help="part 3: bench namespaces in all (default 200)")
    ap.add_argument("--copies", choices=["both", "on", "off"], default="both", help="part 3: copied CSVs (default both)")
    ap.add_argument("--side", choices=["ours", "upstream", "both"], default="ours",
                    help="part 3: olm run, upstream OLM v0.46.0's olm operator, or both side by side (default ours)")
    ap.add_argument("--shared-crd", action="store_true", help="part 3: all CSVs own the same CRD (default: one each)")
    ap.add_argument("--groups-before-olm", action="store_true",
                    help="part 3: create the namespaces and OperatorGroups before olm run starts (default: after)")
    ap.add_argument("--quiet", type=float, default=5, help="part 3: seconds without an OLM write that mean converged (default 5)")
    ap.add_argument("--timeout", type=float, default=60, help="part 1: seconds an install may take (default 60)")
    ap.add_argument("--scale-timeout", type=float, default=900,
                    help="part 2: seconds to wait for all CSVs; part 3: for all CSVs Succeeded and OLM's last write, "
                         "else it reports what was reached (default 900)")
    ap.add_argument("--olm", default=str(REPO / "target/release/olm"), help="olm binary (default target/release/olm)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    ap.add_argument("--keep-logs", action="store_true", help="keep olm run's and the control plane's logs")
    ap.add_argument("--report", metavar="JSON", help="print the tables of a saved --json output and exit")
    args = ap.parse_args()
    if args.report:
        report(json.loads(Path(args.report).read_text()), args)
        return
    parts = {int(p) for p in args.parts.split(",") if p.strip()}
    if not parts <= {1, 2, 3}:
        ap.error("--parts takes 1, 2 and/or 3")
    if args.side == "upstream" and parts != {3}:
        ap.error("parts 1 and 2 run olm run only: --side upstream needs --parts 3")
    sides = ["ours", "upstream"] if args.side == "both" else [args.side]
    args.olm = str(Path(args.olm).resolve())
    if "ours" in sides and not os.access(args.olm, os.X_OK):
        ap.error(f"no olm binary at {args.olm}: run `cargo build --release --bin olm`, or pass --olm PATH")
    upstream = None
    if "upstream" in sides and 3 in parts:
        try:
            upstream = upstream_olm_paths()
        except BenchError as e:
            ap.error(str(e))
    if not shutil.which("kubectl"):
        ap.error("kubectl is not on PATH")

    interrupt_on_signals()

    workdir = Path(tempfile.mkdtemp(prefix="olm-bench-csv-"))
    results = {"olm_binary": args.olm, "args": vars(args)}
    if upstream:
        results["upstream_olm"] = str(upstream[0] / "olm")
    failure, keep = None, args.keep_logs
    try:
        if parts & {1, 2}:
            results["own"] = parts_1_2(args, workdir, parts)
        if 3 in parts:
            for mode in (["on", "off"] if args.copies == "both" else [args.copies]):
                for side in sides:
                    key = "all_namespaces" if side == "ours" else "upstream_all_namespaces"
                    results.setdefault(key, {})[mode] = part_3(args, workdir, mode == "on", side, upstream)
    except BenchError as e:
        failure, keep = str(e), True
    except KeyboardInterrupt:
        failure, keep = "interrupted", True
    finally:
        ignore_signals()
        for bench in BENCHES:
            bench.teardown()
        if keep:
            log(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    else:
        report(results, args)
    ours_open = [m for m, r in (results.get("all_namespaces") or {}).items() if r.get("not_converged")]
    if ours_open and not failure:  # upstream's not converging is a figure; ours' is a failure
        failure = f"olm run did not converge within {args.scale_timeout:g} s (copies {', '.join(ours_open)})"
    if failure:
        print(f"\nerror: {failure}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
