#!/usr/bin/env python3
"""Benchmark: installing an operator through a Subscription, `olm run` side by side with
upstream OLM v0.46.0, each on its own audited control plane: install time, API requests and
writes, RSS, and what OLM does once idle. Method: hack/bench/README.md.

Also the side-by-side machinery bulk.py, csv.py, install-catalog.py and rest.py build on: the
sides (Upstream, Ours, run_sides), the audit log's request counting and the CSV watch.

Usage: hack/bench/install.py [--runs 10] [--side both|upstream|ours] [--idle 60] [--settle 15] [--json] [--timeline]
       (needs hack/upstream-olm/build, hack/opm/build and, for our side,
        `cargo build --release --bin olm`; the control planes are started and removed here)
"""
import argparse, collections, datetime, json, os, shutil, socket, statistics, subprocess, sys, tempfile
import threading, time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    BENCH_UA, REPO, UPSTREAM_VERSION, Api, BenchError, Cluster, Processes, free_port, ignore_signals,
    interrupt_on_signals, log, opm_path, rss_mib, server_env, upstream_olm_paths, wait_port, wait_ready,
)

PACKAGE, CHANNEL = "reverse-words", "stable"
GLOBAL_NS = "olm"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
# Clients that are not OLM: the control plane's own, kubectl and the benches' (olm-bench).
NOT_OLM = ("kubectl", "kube-controller-manager", "kube-scheduler", "kube-apiserver", "kwok", BENCH_UA)


def parse_ts(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# ---------------------------------------------------------------------------- watch


class CsvWatch(threading.Thread):
    """Watches the CSVs of one namespace; records when each phase is first seen."""

    timeout_seconds = 300  # the watch's own; it ends (quietly) after that

    def __init__(self, api, namespace):
        super().__init__(daemon=True)
        self.api, self.namespace = api, namespace
        self.phases = {}  # phase -> (wall time, CSV name)
        self.succeeded = threading.Event()
        self.ready = threading.Event()
        self.error = None
        self.stop = False
        self.conn = None

    def run(self):
        # namespace None: every namespace's CSVs.
        scope = f"namespaces/{self.namespace}/" if self.namespace else ""
        base = f"/apis/operators.coreos.com/v1alpha1/{scope}clusterserviceversions"
        try:
            listing = self.api.get(base)
            rv = listing["metadata"]["resourceVersion"]
            for item in listing.get("items", []):
                self.saw(item)
            c = self.api.conn(timeout=5)
            c.request("GET", f"{base}?watch=1&allowWatchBookmarks=false&timeoutSeconds={self.timeout_seconds}&resourceVersion={rv}",
                      headers={"User-Agent": BENCH_UA, "Accept": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                raise BenchError(f"watch {base}: {r.status}")
            c.sock.settimeout(None)  # a timed-out read would leave the response unusable
            self.conn = c
            self.ready.set()
            while not self.stop:
                line = r.readline()
                if not line:
                    break
                event = json.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self.saw(event["object"])
        except Exception as e:  # noqa: BLE001  reported by the waiter
            if not self.stop:
                self.error = e
            self.ready.set()
            self.succeeded.set()

    def close(self):
        self.stop = True
        if self.conn is not None:
            try:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.conn.close()

    def saw(self, csv):
        now = time.time()
        phase = (csv.get("status") or {}).get("phase")
        if phase and phase not in self.phases:
            self.phases[phase] = (now, csv["metadata"]["name"])
        if phase == "Succeeded":
            self.succeeded.set()


# ---------------------------------------------------------------------------- audit


class Audit:
    """Reads the API server's audit log incrementally; one record per request (auditID)."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.requests = {}  # auditID -> (received, verb, user agent, resource, namespace, name, code)

    def read(self):
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            ref = ev.get("objectRef") or {}
            resource = ref.get("resource") or ev.get("requestURI", "").split("?")[0]
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            self.requests.setdefault(ev["auditID"], (
                parse_ts(ev["requestReceivedTimestamp"]), ev["verb"], ev.get("userAgent", ""), resource,
                ref.get("namespace", ""), ref.get("name", ""), (ev.get("responseStatus") or {}).get("code")))

    def catch_up(self, until, poke):
        """Reads until the log holds a request received after `until` (so the batched
        writes of earlier ones have landed); `poke` makes one (a GET), as the cluster may be
        quiet. Gives up after a few seconds."""
        poke()
        deadline = time.time() + 5
        while True:
            self.read()
            if any(r[0] >= until for r in self.requests.values()) or time.time() > deadline:
                return
            time.sleep(0.2)

    def window(self, start, end):
        return [r for r in self.requests.values() if start <= r[0] < end]

    def subscription_create(self, namespace):
        times = [r[0] for r in self.requests.values()
                 if r[1] == "create" and r[3] == "subscriptions" and r[4] == namespace and r[2].startswith("kubectl")]
        return min(times) if times else None


def olm_requests(records):
    return [r for r in records if not any(r[2].startswith(p) for p in NOT_OLM)]


def short_ua(ua):
    return ua.split(" ")[0]


def summarize(records):
    """Counts of OLM's requests in a window: total, writes, and per user agent and verb."""
    mine = olm_requests(records)
    by_agent = collections.Counter((short_ua(r[2]), r[1]) for r in mine)
    writes = collections.Counter((short_ua(r[2]), r[1], r[3], r[4], r[6]) for r in mine if r[1] in WRITE_VERBS)
    return {
        "requests": len(mine),
        "writes": sum(1 for r in mine if r[1] in WRITE_VERBS),
        "by_agent_verb": {f"{a} {v}": n for (a, v), n in sorted(by_agent.items())},
        "writes_detail": {f"{a} {v} {res}" + (f" ns={ns}" if ns else "") + f" → {code}": n
                          for (a, v, res, ns, code), n in sorted(writes.items(), key=str)},
        "last_write": max((r[0] for r in mine if r[1] in WRITE_VERBS), default=None),
    }


# ---------------------------------------------------------------------------- sides


def catalog_without_images(src, dst):
    """A copy of the FBC catalog with the bundles' top-level `image:` removed (only olm.bundle
    documents have a top-level image), so upstream installs from the inline objects. JSON
    files (a stream of documents, as `olm catalog render` writes) are decoded and written
    back one document a line, the olm.bundle ones without `image`."""
    removed = 0
    for path in sorted(src.rglob("*")):
        target = dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix not in (".yaml", ".yml"):
            if path.suffix == ".json":
                removed += json_without_images(path, target)
            else:
                shutil.copy(path, target)
            continue
        lines = path.read_text().splitlines(keepends=True)
        kept = [ln for ln in lines if not ln.startswith("image: ")]
        removed += len(lines) - len(kept)
        target.write_text("".join(kept))
    if not removed:
        raise BenchError(f"no bundle image removed from {src}")
    return removed


def json_without_images(src, dst):
    """One JSON stream of FBC documents copied without the olm.bundle documents' `image`;
    returns how many were removed."""
    text, decoder, pos, removed = src.read_text(), json.JSONDecoder(), 0, 0
    with open(dst, "w") as out:
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                return removed
            try:
                doc, pos = decoder.raw_decode(text, pos)
            except ValueError as e:
                raise BenchError(f"{src}: not a JSON stream: {e}") from None
            if isinstance(doc, dict) and doc.get("schema") == "olm.bundle" and "image" in doc:
                del doc["image"]
                removed += 1
            out.write(json.dumps(doc, separators=(",", ":")) + "\n")


class Side:
    name = ""
    label = ""
    catalog = REPO / "catalog"  # the FBC served to both sides
    server_timeout = 120  # seconds the catalog server may take to listen

    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir / self.name
        self.workdir.mkdir()
        self.procs = Processes(self.workdir)
        self.cluster = Cluster(self.name)
        self.olm_pids = {}  # process label -> pid (the OLM processes, whose RSS is compared)
        self.server_pid = None
        self.address = None
        self.notes = []

    # start(): CRDs, catalog server, OLM processes. Subclasses.

    def teardown(self):
        self.procs.stop_all()
        self.cluster.down()

    def wait_quiet(self, ns, quiet=2.0, timeout=30):
        """Waits until OLM has made no API request for `quiet` seconds, so that one run's tail
        (or the previous namespace's deletion) is not counted in the next install."""
        deadline = time.time() + timeout
        while True:
            now = time.time()
            self.audit.catch_up(now, self.poke)
            last = max((r[0] for r in olm_requests(self.audit.window(now - quiet, now + 60))), default=None)
            if last is None:
                return
            if time.time() > deadline:
                log(f"{self.name}: warning: OLM still busy {timeout:g}s after {ns} was set up; starting anyway")
                return
            time.sleep(max(0.2, last + quiet - time.time()))

    def poke(self):
        self.api.get("/api/v1/namespaces/default")

    def check_alive(self):
        for proc in self.procs.procs:
            self.procs.check(proc)

    def rss(self):
        olm = {k: rss_mib(pid) for k, pid in self.olm_pids.items()}
        return {"olm": olm, "olm_total": sum(v for v in olm.values() if v is not None),
                "catalog_server": rss_mib(self.server_pid)}

    def run(self):
        self.cluster.up()
        self.api = Api(self.cluster.kubeconfig, self.workdir)
        self.audit = Audit(self.cluster.audit_log)
        self.cluster.kubectl("create", "namespace", GLOBAL_NS)
        self.start()
        results = {"side": self.name, "runs": [], "notes": self.notes}
        for i in range(self.args.runs):
            last = i == self.args.runs - 1
            results["runs"].append(self.one_install(i, last))
        results["rss_after_install"] = self.rss()
        succeeded_at = results["runs"][-1]["succeeded_at"]
        idle_start = succeeded_at + self.args.settle
        idle_end = idle_start + self.args.idle
        log(f"{self.name}: {self.args.settle:g}s to settle, then {self.args.idle:g}s idle, with the operator installed")
        while time.time() < idle_end:
            self.check_alive()
            time.sleep(min(1.0, max(0.0, idle_end - time.time())))
        results["rss_after_idle"] = self.rss()
        self.check_alive()
        self.audit.catch_up(idle_end, self.poke)
        results["settle"] = summarize(self.audit.window(succeeded_at, idle_start))
        results["settle"]["seconds"] = self.args.settle
        results["idle"] = summarize(self.audit.window(idle_start, idle_end))
        last_write = results["idle"]["last_write"] or results["settle"]["last_write"]
        results["last_write_after_succeeded"] = None if last_write is None else last_write - succeeded_at
        shutil.copy(self.cluster.audit_log, self.workdir / "audit.log")  # kept with --keep-logs
        results["idle"]["seconds"] = self.args.idle
        return results

    def one_install(self, i, last):
        ns = f"bench-{self.name}-{i}"
        k = self.cluster.kubectl
        k("create", "namespace", ns)
        k("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
             "metadata": {"name": "bench", "namespace": ns},
             "spec": {"sourceType": "grpc", "address": self.address, "displayName": "bench"}},
            {"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
             "metadata": {"name": "bench", "namespace": ns}, "spec": {"targetNamespaces": [ns]}},
        ]}))
        # Ready before the clock starts: the catalog connected, the OperatorGroup seen.
        try:
            self.api.poll(f"{self.name}: CatalogSource {ns}/bench READY", 60, lambda: (
                ((self.api.get(f"/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/catalogsources/bench") or {})
                 .get("status") or {}).get("connectionState", {}).get("lastObservedState") == "READY"))
        except BenchError:
            self.check_alive()
            raise
        og_path = f"/apis/operators.coreos.com/v1/namespaces/{ns}/operatorgroups/bench"
        try:
            self.api.poll("OperatorGroup status", 15, lambda: ((self.api.get(og_path) or {}).get("status") or {}).get("namespaces"))
        except BenchError:
            note = f"OperatorGroup {ns}/bench has no status.namespaces after 15 s (starting the clock anyway)"
            if note not in self.notes:
                self.notes.append(note)
            log(f"{self.name}: warning: {note}")
        self.wait_quiet(ns)
        watch = CsvWatch(self.api, ns)
        watch.start()
        if not watch.ready.wait(30) or watch.error:
            raise BenchError(f"watch on CSVs in {ns} failed: {watch.error}")
        sub = {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
               "metadata": {"name": PACKAGE, "namespace": ns},
               "spec": {"name": PACKAGE, "channel": CHANNEL, "source": "bench", "sourceNamespace": ns,
                        "installPlanApproval": "Automatic"}}
        launched = time.time()
        k("apply", "-f", "-", stdin=json.dumps(sub))
        applied = time.time()
        deadline = launched + self.args.timeout
        while not watch.succeeded.wait(0.5):
            self.check_alive()
            if time.time() > deadline:
                break
        watch.close()
        if watch.error:
            raise BenchError(f"watch on CSVs in {ns} failed: {watch.error}")
        if "Succeeded" not in watch.phases:
            seen = ", ".join(f"{p} at +{t - launched:.2f}s" for p, (t, _) in watch.phases.items()) or "no CSV"
            raise BenchError(f"{self.label}: {'our' if self.name == 'ours' else 'the upstream'} install did not "
                             f"reach Succeeded in {self.args.timeout:g} s (namespace {ns}; seen: {seen}); "
                             f"logs in {self.workdir}")
        succeeded_at, csv_name = watch.phases["Succeeded"]
        self.audit.catch_up(succeeded_at, self.poke)
        created = self.audit.subscription_create(ns)
        if created is None:
            raise BenchError(f"the Subscription create in {ns} is not in the audit log")
        install = summarize(self.audit.window(created, succeeded_at))
        if self.args.timeline:
            for r in sorted(self.audit.window(created, succeeded_at)):
                print(f"  +{(r[0] - created) * 1000:7.1f} ms  {short_ua(r[2])[:30]:30} {r[1]:6} {r[3]} "
                      f"{r[4]}/{r[5]} → {r[6]}", file=sys.stderr)
        run = {"namespace": ns, "csv": csv_name, "seconds": succeeded_at - created,
               "seconds_from_kubectl": succeeded_at - launched, "kubectl_apply_seconds": applied - launched,
               "phases": {p: round(t - created, 4) for p, (t, _) in watch.phases.items()},
               "succeeded_at": succeeded_at, "install": install}
        log(f"{self.name} run {i + 1}/{self.args.runs}: {csv_name} Succeeded {run['seconds']:.3f}s after the "
            f"create ({run['seconds_from_kubectl']:.3f}s after launching kubectl apply); "
            f"{install['requests']} requests, {install['writes']} writes")
        if not last:
            k("delete", "namespace", ns, "--wait=false")
            try:
                self.api.poll(f"namespace {ns} deleted", 120, lambda: self.api.get(f"/api/v1/namespaces/{ns}") is None, 0.25)
            except BenchError:
                log(f"{self.name}: warning: namespace {ns} still exists after 120 s; going on")
        return run


class Upstream(Side):
    name = "upstream"
    label = f"upstream OLM {UPSTREAM_VERSION}"

    def prepare(self):
        self.bin, self.crds = upstream_olm_paths()
        self.opm = opm_path()

    def start(self):
        self.install_crds()
        catalog = self.workdir / "catalog"
        removed = catalog_without_images(self.catalog, catalog)
        self.notes.append(f"served with opm serve: a copy of {self.catalog.name}/ without the {removed} bundles' image")
        port = free_port()
        server = self.procs.spawn("opm-serve", [self.opm, "serve", catalog, "--port", port, "--pprof-addr", "",
                                                "-t", "/dev/null"], env=server_env())
        wait_port(server, port, self.server_timeout)
        self.server_pid, self.address = server.pid, f"127.0.0.1:{port}"
        self.start_operators()

    def install_crds(self):
        k = self.cluster.kubectl
        k("create", "-f", self.crds)  # create: apply's last-applied annotation is too big for the CSV CRD
        k("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")

    def start_operators(self, namespace=GLOBAL_NS, catalog=True):
        """Upstream's olm and catalog operators with `namespace` as the global catalog
        namespace, watching every namespace (v0.46.0's olm operator panics at start when
        --watchedNamespaces leaves any out, operator.go:645; its catalog operator has no such
        flag). catalog=False: the olm operator alone."""
        env = dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig))
        env.pop("CI", None)  # upstream's validating round tripper panics on unlabelled objects when CI is set
        # Both bind :8080 (health, metrics; :8443 with TLS), hard-coded; whichever starts second
        # logs "address already in use" and runs on without it (the listener is not fatal).
        olm = self.procs.spawn("olm", [self.bin / "olm", "--namespace", namespace], env=env, cwd=self.workdir)
        self.olm_pids = {"olm": olm.pid}
        if catalog:
            catalog_op = self.procs.spawn("catalog", [self.bin / "catalog", "--namespace", namespace,
                                                      "--kubeconfig", self.cluster.kubeconfig], env=env, cwd=self.workdir)
            self.olm_pids["catalog"] = catalog_op.pid
        time.sleep(2)
        self.check_alive()
        for name in self.olm_pids:
            text = (self.workdir / f"{name}.log").read_text(errors="replace")
            if "address already in use" in text:
                self.notes.append(f"upstream {name}: its metrics/health listener could not bind :8080 "
                                  "(address already in use; not fatal, it runs on without it)")


class Ours(Side):
    name = "ours"
    label = "olm-rs"

    def prepare(self):
        self.bin = Path(self.args.olm).resolve()
        if not os.access(self.bin, os.X_OK):
            raise BenchError(f"no {self.bin}: run cargo build --release --bin olm")

    def start(self):
        self.install_crds()
        port = free_port()
        server = self.procs.spawn("olm-catalog-serve", [self.bin, "catalog", "serve", self.catalog,
                                                        "--address", "127.0.0.1", "--port", port])
        wait_port(server, port, self.server_timeout)
        self.server_pid, self.address = server.pid, f"127.0.0.1:{port}"
        admin = free_port()
        env = dict(os.environ, KUBECONFIG=str(self.as_deployed() or self.cluster.kubeconfig))
        olm = self.procs.spawn("olm-run", [self.bin, "run", "--leader-elect=false", "--packages-address", "off",
                                           "--admin-address", f"127.0.0.1:{admin}"], env=env, cwd=self.workdir)
        wait_ready(olm, admin, 60)
        self.olm_pids = {"olm run": olm.pid}

    def as_deployed(self):
        """With OLM_BENCH_AS_DEPLOYED=1: deploy/'s namespace and RBAC applied, and a kubeconfig
        acting as its ServiceAccount (olm:olm-operator), so that OLM runs with exactly the
        rights an admin gives it. None otherwise."""
        if os.environ.get("OLM_BENCH_AS_DEPLOYED") != "1":
            return None
        import yaml  # noqa: PLC0415
        for name in ("namespace.yaml", "rbac.yaml", "aggregated-roles.yaml"):
            self.cluster.kubectl("apply", "-f", REPO / "deploy" / name)
        config = yaml.safe_load(Path(self.cluster.kubeconfig).read_text())
        for user in config["users"]:
            user["user"]["as"] = "system:serviceaccount:olm:olm-operator"
        path = self.workdir / "kubeconfig-as-deployed"
        path.write_text(yaml.safe_dump(config))
        self.notes.append("olm run acts as system:serviceaccount:olm:olm-operator with deploy/rbac.yaml's rights")
        return path

    def install_crds(self):
        k = self.cluster.kubectl
        crds = subprocess.run([self.bin, "crds"], capture_output=True, text=True, check=True).stdout
        k("create", "-f", "-", stdin=crds)
        k("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")


# ---------------------------------------------------------------------------- report


def aggregate(res):
    runs = res["runs"]
    med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
    return {
        "time": med("seconds"), "time_min": min(r["seconds"] for r in runs), "time_max": max(r["seconds"] for r in runs),
        "time_kubectl": med("seconds_from_kubectl"),
        "install_requests": statistics.median(r["install"]["requests"] for r in runs),
        "install_writes": statistics.median(r["install"]["writes"] for r in runs),
        "settle_requests": res["settle"]["requests"], "settle_writes": res["settle"]["writes"],
        "last_write": res["last_write_after_succeeded"],
        "idle_requests": res["idle"]["requests"], "idle_writes": res["idle"]["writes"],
        "rss_install": res["rss_after_install"]["olm_total"], "rss_idle": res["rss_after_idle"]["olm_total"],
        "server_rss": res["rss_after_idle"]["catalog_server"],
    }


def fmt(value, unit):
    if value is None:
        return "—"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    return f"{value:g}"


def ratio(up, ours):
    if up is None or ours is None:
        return "—"
    if ours == 0:
        return "∞" if up else "="
    return f"{up / ours:.1f}x"


def report(results, args):
    sides = [s for s in ("upstream", "ours") if s in results]
    agg = {s: aggregate(results[s]) for s in sides}
    rows = [
        ("install time, median (create → Succeeded)", "time", "s"),
        ("  fastest", "time_min", "s"),
        ("  slowest", "time_max", "s"),
        ("install time incl. kubectl apply, median", "time_kubectl", "s"),
        ("RSS of OLM after the install (olm + catalog | olm run)", "rss_install", "MiB"),
        (f"RSS of OLM after {args.idle:g} s idle", "rss_idle", "MiB"),
        ("requests during the install, median", "install_requests", ""),
        ("  of which writes", "install_writes", ""),
        (f"requests in the {args.settle:g} s after Succeeded (last install)", "settle_requests", ""),
        ("  of which writes", "settle_writes", ""),
        ("last write after Succeeded", "last_write", "s"),
        (f"requests while idle (the {args.idle:g} s after those)", "idle_requests", ""),
        ("  of which writes", "idle_writes", ""),
        ("catalog server RSS (opm serve | olm catalog serve)", "server_rss", "MiB"),
    ]
    header = ["", *(f"upstream {UPSTREAM_VERSION}" if s == "upstream" else "olm-rs" for s in sides)]
    if len(sides) == 2:
        header.append("upstream/ours")
    table = [header]
    for label, key, unit in rows:
        row = [label, *(fmt(agg[s][key], unit) for s in sides)]
        if len(sides) == 2:
            row.append(ratio(agg["upstream"][key], agg["ours"][key]))
        table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    print()
    print(f"Install of {PACKAGE} (channel {CHANNEL}) through a Subscription, {args.runs} run(s) per side")
    print("  time: from the API server receiving the Subscription create (audit log) to the CSV's")
    print("  phase Succeeded arriving on a watch (event-driven, no polling; ~1 ms resolution)")
    for r in table:
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    for s in sides:
        res = results[s]
        print(f"\n{header[1 + sides.index(s)]}:")
        print("  install times: " + ", ".join(f"{r['seconds']:.3f}" for r in res["runs"]) + " s")
        print("  phases seen (s after the create, last run): "
              + ", ".join(f"{p} {t:.3f}" for p, t in res["runs"][-1]["phases"].items()))
        rss = res["rss_after_idle"]["olm"]
        print("  RSS after install / after idle: " + ", ".join(
            f"{k} {res['rss_after_install']['olm'][k] or 0:.1f} / {v or 0:.1f} MiB" for k, v in rss.items()))
        print("  requests during the last install, by client and verb: "
              + (", ".join(f"{k} {n}" for k, n in res["runs"][-1]["install"]["by_agent_verb"].items()) or "none"))
        print(f"  requests in the {args.settle:g} s after Succeeded, by client and verb: "
              + (", ".join(f"{k} {n}" for k, n in res["settle"]["by_agent_verb"].items()) or "none"))
        print("  requests while idle, by client and verb: "
              + (", ".join(f"{k} {n}" for k, n in res["idle"]["by_agent_verb"].items()) or "none"))
        if res["idle"]["writes_detail"]:
            print("  writes while idle: " + ", ".join(f"{k} ×{n}" for k, n in res["idle"]["writes_detail"].items()))
        for note in res["notes"]:
            print(f"  note: {note}")
    if len(sides) == 2:
        a = agg
        print(f"\nTargets: under 1 s ({'met' if a['ours']['time'] < 1 else 'NOT met'}), "
              f"10x faster than upstream ({a['upstream']['time'] / a['ours']['time']:.1f}x), "
              f"zero writes while idle ({'met' if a['ours']['idle_writes'] == 0 else 'NOT met'})")


# ---------------------------------------------------------------------------- main


def run_sides(make_sides, run_one, workdir, keep_logs):
    """Makes the sides and prepares each (every prerequisite first, before minutes of work),
    then runs run_one(side) for each in turn, tearing each down before the next starts.
    On a failure or Ctrl-C everything still running is torn down and workdir is kept (as
    with keep_logs). Returns (results by side name, the failure or None)."""
    results, failure, keep, sides = {}, None, keep_logs, []
    try:
        sides.extend(make_sides())
        for side in sides:
            side.prepare()
        for side in sides:
            try:
                results[side.name] = run_one(side)
            except BenchError:
                keep = True
                raise
            side.teardown()
    except BenchError as e:
        failure = str(e)
    except KeyboardInterrupt:
        failure, keep = "interrupted", True
    finally:
        ignore_signals()
        for side in sides:
            side.teardown()  # idempotent: anything a failure or signal left running
        if keep:
            log(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return results, failure


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="installs per side (median reported; default 10)")
    ap.add_argument("--side", choices=["both", "upstream", "ours"], default="both")
    ap.add_argument("--idle", type=float, default=60, help="seconds of idle after the last install (default 60)")
    ap.add_argument("--settle", type=float, default=15,
                    help="seconds after the last Succeeded before the idle window, counted apart (default 15)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds an install may take (default 60)")
    ap.add_argument("--olm", default=str(REPO / "target/release/olm"), help="our binary (default target/release/olm)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    ap.add_argument("--timeline", action="store_true",
                    help="print every API request of each install (all clients), with its time after the create")
    ap.add_argument("--keep-logs", action="store_true", help="keep the processes' logs (their directory is printed)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    interrupt_on_signals()

    workdir = Path(tempfile.mkdtemp(prefix="olm-bench-install-"))
    kinds = {"upstream": Upstream, "ours": Ours}
    names = ["upstream", "ours"] if args.side == "both" else [args.side]
    results, failure = run_sides(lambda: [kinds[n](args, workdir) for n in names], Side.run, workdir,
                                 args.keep_logs)
    if results:
        if args.json:
            print(json.dumps(results, indent=2, default=str))
        else:
            report(results, args)
    if failure:
        print(f"\nerror: {failure}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
