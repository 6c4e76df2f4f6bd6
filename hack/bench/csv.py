#!/usr/bin/env python3
"""Benchmark: the CSV and OperatorGroup controllers of `olm run`, with CSVs applied by hand
(no Subscription, no catalog), on a control plane of its own.

Every part runs on a fresh control plane started here (hack/cluster/up with OLM_AUDIT=1 on
ports 29443/26790/26800 and state in target/cluster-csvbench; the shared test cluster at
target/cluster is never touched) and removed after it (`hack/cluster/down --clean`, also on
failure or Ctrl-C), with `olm crds` created and one `olm run --leader-elect=false`.

Part 1, applied → Succeeded (--runs, 10): the reverse-words 0.3.0 CRD is created once; each
run gets a fresh namespace with an OwnNamespace OperatorGroup, waits for its
status.namespaces and for OLM to be quiet (no request for 2 s), then `kubectl apply` of the
bundle's CSV. The time runs from the API server receiving the CSV's create (audit log) to the
phase Succeeded arriving on a watch of that namespace's CSVs (event-driven, no polling); the
time from launching kubectl is shown too. The namespaces are kept: they are the first
operators of part 2 (so run k runs with k-1 operators installed).

Part 2, idle (--operators 20, --idle 60): more namespaces like part 1's, installed at once,
until --operators CSVs are Succeeded; then --settle s (15) counted apart and an --idle window
in which OLM's requests are counted from the audit log (writes must be 0), as is the change of
`olm_status_writes_total` and `olm_reconciles_total` on /metrics, and RSS (VmRSS) of olm run.
With --startup S, olm run is then restarted on the cluster with those operators installed and
its requests in its first S s are counted from the audit log by verb and resource (the lists
and watches it starts with), as is its RSS at the end of them.

Part 3, AllNamespaces at scale (--csvs 100, --namespaces 200, --copies both): --csvs
namespaces each with an AllNamespaces OperatorGroup (no targetNamespaces) and a CSV
`bench-N.v0.1.0` (reverse-words 0.3.0 with AllNamespaces supported, no replaces, owning its
own CRD `reversewordsapps.benchN.linuxera.org` unless --shared-crd), plus plain namespaces up
to --namespaces in all. CRDs exist before olm run starts, namespaces and OperatorGroups are
created after it (--groups-before-olm: before it) and ready (status.namespaces) before the
clock starts at the API server receiving the first CSV create (one `kubectl apply` of all of
them) and reports when all CSVs were Succeeded (watch) and when OLM converged: its last write
before --quiet s (5) with no write from it. Objects OLM created are the audit log's OLM
requests answered 201 (a create or an apply that created), per resource; copies are also
counted by listing. Run once with copied CSVs and once with --disable-copied-csvs, each on its
own control plane.

Usage: hack/bench/csv.py [--parts 1,2,3] [--runs 10] [--operators 20] [--idle 60] [--startup 20]
           [--csvs 100] [--namespaces 200] [--copies both|on|off] [--olm PATH] [--json]
       (needs `cargo build --release --bin olm`, or --olm PATH to a built one)
"""
import argparse, collections, copy, json, os, re, shutil, signal, socket, statistics, subprocess
import sys, tempfile, threading, time, urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import install as ib  # noqa: E402  (the install benchmark's helpers: cluster, audit, processes, API client)
from install import BenchError, log, rss_mib  # noqa: E402

REPO = ib.REPO
BUNDLE = REPO / "bundles/reverse-words/0.3.0/manifests"
CSV_FILE = BUNDLE / "reverse-words.v0.3.0.clusterserviceversion.yaml"
CRD_FILE = BUNDLE / "apps.linuxera.org_reversewordsapps.yaml"
GLOBAL_NS = "olm"
CSV_PATH = "/apis/operators.coreos.com/v1alpha1"
BENCHES = []  # every Bench made, torn down again (idempotent) when main() ends
ib.CLUSTERS["csvbench"] = (REPO / "target/cluster-csvbench", 29443, 26790, 26800)
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


def proc_status(pid, key):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return None


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
    keys = set(before.get(name, {})) | set(after.get(name, {}))
    delta = {k: after.get(name, {}).get(k, 0) - before.get(name, {}).get(k, 0) for k in keys}
    return {"total": sum(delta.values()), "by_label": {k: v for k, v in sorted(delta.items()) if v}}


class Bench:
    """One control plane with olm run on it."""

    def __init__(self, args, workdir, label, olm_flags=(), nodes=1):
        self.args, self.label, self.olm_flags, self.nodes = args, label, list(olm_flags), nodes
        self.workdir = workdir / label
        self.workdir.mkdir()
        self.procs = ib.Processes(self.workdir)
        self.cluster = ib.Cluster("csvbench")
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
        while any(ib.port_busy(p) for p in (self.cluster.api_port, self.cluster.etcd_port, self.cluster.peer_port)) \
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
        self.api = ib.Api(self.cluster.kubeconfig, self.workdir)
        self.audit = ib.Audit(self.cluster.audit_log)
        self.k("create", "namespace", GLOBAL_NS)
        crds = subprocess.run([self.args.olm, "crds"], capture_output=True, text=True, check=True).stdout
        self.k("create", "-f", "-", stdin=crds)
        self.k("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")

    def start_olm(self, name="olm-run"):
        self.admin = ib.free_port()
        env = dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig))
        env.setdefault("RUST_LOG", "info")
        self.olm_started = time.time()
        self.olm = self.procs.spawn(name, [self.args.olm, "run", "--leader-elect=false", "--packages-address", "off",
                                           "--admin-address", f"127.0.0.1:{self.admin}", *self.olm_flags],
                                    env=env, cwd=self.workdir)
        ib.wait_port(self.procs, self.olm, self.admin, 60)
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            self.procs.check(self.olm)
            if time.time() > deadline:
                raise BenchError(f"olm run is not ready after 60 s; log: {self.workdir / 'olm-run.log'}")
            time.sleep(0.1)
        log(f"{self.label}: olm run ready (pid {self.olm.pid}, admin :{self.admin}, flags {self.olm_flags or 'none'})")

    def stop_olm(self):
        """SIGTERM to olm run (its own process group), SIGKILL after 10 s."""
        try:
            os.killpg(self.olm.pid, signal.SIGTERM)
            self.olm.wait(10)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.olm.pid, signal.SIGKILL)
            self.olm.wait()

    def metrics(self):
        return metrics(self.admin)

    def rss(self):
        return {"rss_mib": proc_status(self.olm.pid, "VmRSS"), "peak_rss_mib": proc_status(self.olm.pid, "VmHWM")}

    def check_alive(self):
        self.procs.check(self.olm)

    def poke(self):
        self.api.get("/api/v1/namespaces/default")

    def wait_quiet(self, quiet=2.0, timeout=60, writes_only=False):
        """Until OLM has made no request (or no write) for `quiet` s; returns the time of its last one."""
        deadline = time.time() + timeout
        while True:
            now = time.time()
            self.audit.catch_up(now, self.poke)
            recent = ib.olm_requests(self.audit.window(now - max(quiet, 30), now + 60))
            if writes_only:
                recent = [r for r in recent if r[1] in ib.WRITE_VERBS]
            last = max((r[0] for r in recent), default=None)
            if last is None or last < now - quiet:
                return last
            if time.time() > deadline:
                log(f"{self.label}: warning: OLM still busy after {timeout:g} s; going on")
                return last
            self.check_alive()
            time.sleep(max(0.2, last + quiet - time.time()))

    def olm_log_problems(self, limit=8):
        """WARN/ERROR lines of olm run's log (ANSI colours stripped), first few and a count."""
        try:
            text = (self.workdir / "olm-run.log").read_text(errors="replace")
        except FileNotFoundError:
            return {"count": 0, "lines": []}
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in text.splitlines()]
        bad = [ln for ln in lines if re.search(r"\b(WARN|ERROR)\b", ln)]
        return {"count": len(bad), "lines": bad[:limit]}

    def teardown(self):
        self.procs.stop_all()
        self.cluster.down()


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
                    "User-Agent": ib.BENCH_UA,
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
                          headers={"User-Agent": ib.BENCH_UA, "Accept": "application/json"})
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


def wait_all_succeeded(bench, watch, keys, timeout, what):
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
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            {"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
             "metadata": {"name": "bench", "namespace": ns}, "spec": {"targetNamespaces": [ns]}}]


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


def part_3(args, workdir, copies):
    label = f"all-namespaces-copies-{'on' if copies else 'off'}"
    flags = [] if copies else ["--disable-copied-csvs"]
    bench = Bench(args, workdir, label, flags, nodes=1 + (args.csvs + 99) // 100)
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
        bench.k("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": csvs}))
        keys = [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in csvs]
        all_succeeded = wait_all_succeeded(bench, watch, keys, args.scale_timeout, label)
        log(f"{label}: all {len(keys)} CSVs Succeeded {all_succeeded - launched:.1f} s after launching kubectl; "
            f"waiting for OLM to stop writing ({args.quiet:g} s)")
        rss_peak_sample = bench.rss()
        last_write = bench.wait_quiet(args.quiet, timeout=args.scale_timeout, writes_only=True)
        watch.close()
        rss_end = bench.rss()
        m1 = bench.metrics()
        bench.audit.catch_up(time.time(), bench.poke)
        first_create = csv_create_time(bench.audit)
        if first_create is None:
            raise BenchError("no CSV create in the audit log")
        converged = max(last_write or all_succeeded, all_succeeded)
        window = bench.audit.window(first_create, converged + 0.001)
        summary = ib.summarize(window)
        after = count_objects(bench.api)
        expected_copies = 0 if not copies else len(csvs) * (namespaces_total - 1)
        succ_times = sorted(t - first_create for t in watch.succeeded(keys).values())
        res = {
            "copies": copies, "csvs": len(csvs), "namespaces": namespaces_total, "shared_crd": args.shared_crd,
            "seconds_all_succeeded": all_succeeded - first_create,
            "seconds_first_succeeded": succ_times[0], "seconds_median_succeeded": statistics.median(succ_times),
            "seconds_converged": converged - first_create,
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
        }
        log(f"{label}: converged {res['seconds_converged']:.1f} s after the first create; "
            f"{res['writes']} writes, RSS {rss_end['rss_mib']:.1f} MiB (peak {rss_end['peak_rss_mib']:.1f})")
        if after.get("copied csvs", 0) != expected_copies:
            res.setdefault("notes", []).append(
                f"copied CSVs: {after.get('copied csvs', 0)} listed, {expected_copies} expected")
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
    olm = res.get("olm_binary")
    print(f"\nolm run: {olm}")
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
    p3 = res.get("all_namespaces") or {}
    if p3:
        modes = [m for m in ("on", "off") if m in p3]
        any3 = p3[modes[0]]
        print(f"\n3. {any3['csvs']} CSVs in AllNamespaces mode, {any3['namespaces']} namespaces in the cluster"
              f" ({'one shared CRD' if any3['shared_crd'] else 'one CRD each'})")
        rows = [["", *(f"copies {m}" for m in modes)]]

        def row(label, fn):
            rows.append([label, *(fn(p3[m]) for m in modes)])
        row("all CSVs Succeeded (s after the first create)", lambda r: fmt(r["seconds_all_succeeded"], "s"))
        row("  first / median CSV Succeeded", lambda r: f"{r['seconds_first_succeeded']:.1f} / {r['seconds_median_succeeded']:.1f} s")
        row(f"converged (last OLM write, then {args.quiet:g} s without)", lambda r: fmt(r["seconds_converged"], "s"))
        row("RSS of olm run before the CSVs", lambda r: fmt(r["rss_before"]["rss_mib"], "MiB"))
        row("RSS at all Succeeded", lambda r: fmt(r["rss_at_all_succeeded"]["rss_mib"], "MiB"))
        row("RSS converged", lambda r: fmt(r["rss_converged"]["rss_mib"], "MiB"))
        row("peak RSS (VmHWM)", lambda r: fmt(r["rss_converged"]["peak_rss_mib"], "MiB"))
        row("OLM requests until converged", lambda r: fmt(r["requests"]))
        row("  of which writes", lambda r: fmt(r["writes"]))
        row("status writes (metric)", lambda r: fmt(r["status_writes"]["total"]))
        row("reconciles (metric)", lambda r: fmt(r["reconciles"]["total"]))
        row("reconcile failures (metric)", lambda r: fmt(r["reconcile_failures"]["total"]))
        kinds = sorted({k for m in modes for k in p3[m]["created_by_olm"]})
        for k in kinds:
            row(f"created by OLM: {k}", lambda r, k=k: fmt(r["created_by_olm"].get(k, 0)))
        for k in ("clusterserviceversions", "copied csvs", *OBJECT_KINDS[1:]):
            row(f"objects added: {k}", lambda r, k=k: fmt(r["objects_delta"].get(k, 0)))
        row("copied CSVs expected", lambda r: fmt(r["expected_copies"]))
        table(rows)
        for m in modes:
            for note in p3[m].get("notes", []):
                print(f"   note (copies {m}): {note}")
            if p3[m]["reconcile_failures"]["by_label"]:
                print(f"   reconcile failures (copies {m}): " + ", ".join(
                    f"{k} {v:g}" for k, v in p3[m]["reconcile_failures"]["by_label"].items()))
    for key, r in [("own-namespace", res.get("own")), *((f"copies {m}", v) for m, v in p3.items())]:
        if r and r.get("olm_log", {}).get("count"):
            print(f"\nolm run log ({key}): {r['olm_log']['count']} WARN/ERROR lines, first ones:")
            for ln in r["olm_log"]["lines"]:
                print("   " + ln[:400])


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
    ap.add_argument("--shared-crd", action="store_true", help="part 3: all CSVs own the same CRD (default: one each)")
    ap.add_argument("--groups-before-olm", action="store_true",
                    help="part 3: create the namespaces and OperatorGroups before olm run starts (default: after)")
    ap.add_argument("--quiet", type=float, default=5, help="part 3: seconds without an OLM write that mean converged (default 5)")
    ap.add_argument("--timeout", type=float, default=60, help="part 1: seconds an install may take (default 60)")
    ap.add_argument("--scale-timeout", type=float, default=900, help="parts 2, 3: seconds to wait for all CSVs (default 900)")
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
    args.olm = str(Path(args.olm).resolve())
    if not os.access(args.olm, os.X_OK):
        ap.error(f"no olm binary at {args.olm}: run `cargo build --release --bin olm`, or pass --olm PATH")
    if not shutil.which("kubectl"):
        ap.error("kubectl is not on PATH")

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    workdir = Path(tempfile.mkdtemp(prefix="olm-bench-csv-"))
    results = {"olm_binary": args.olm, "args": vars(args)}
    failure, keep = None, args.keep_logs
    try:
        if parts & {1, 2}:
            results["own"] = parts_1_2(args, workdir, parts)
        if 3 in parts:
            results["all_namespaces"] = {}
            for mode in (["on", "off"] if args.copies == "both" else [args.copies]):
                results["all_namespaces"][mode] = part_3(args, workdir, mode == "on")
    except BenchError as e:
        failure, keep = str(e), True
    except KeyboardInterrupt:
        failure, keep = "interrupted", True
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut teardown short
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
    if failure:
        print(f"\nerror: {failure}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
