#!/usr/bin/env python3
"""Benchmark: installing every package of a community catalog at once, `olm run` side by side
with upstream OLM v0.46.0, and what became of each install on each side.

CATALOG_REPO is a checkout of redhat-openshift-ecosystem/community-operators-prod (layout
operators/<package>/<version>/{manifests,metadata}), or a part of it such as the testdata in
shared/testdata/community-operators. Prints each package's outcome per side, the counts, the
differences, time to settled, peak RSS and requests. Method: hack/bench/README.md.

Usage: hack/bench/install-catalog.py CATALOG_REPO [--side both|ours|upstream] [--packages a,b]
           [--subscribe a,b] [--timeout 600] [--quiet 180] [--confirm 15] [--nodes 10] [--copied-csvs off|on]
           [--webhooks-on-pods off|on] [--json] [--json-file F]
           [--workdir DIR] [--keep-logs]
       hack/bench/install-catalog.py --from-json F [F ...]   (the report of saved results, merged)
       (needs hack/upstream-olm/build, hack/opm/build, `cargo build --release --bin olm` and go
        for the monitoring CRDs; the control planes are started and removed here)
"""
import argparse, base64, collections, concurrent.futures, hashlib, json, os, re, shutil, socket
import subprocess, sys, tempfile, threading, time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
import install as ib  # noqa: E402  (install.py's sides and audit conventions)
from common import (  # noqa: E402
    BENCH_UA, CACHE, REPO, Api, BenchError, Cluster, ignore_signals, interrupt_on_signals, log, opm_path, proc_started,
    proc_status, server_env,
)

GLOBAL_NS = ib.GLOBAL_NS
CATALOG_NAME = "community"
IMAGE_TEMPLATE = "quay.io/community-operator-pipeline-prod/{{.Package}}:{{.Version}}"
PROM_MODULE = "github.com/prometheus-operator/prometheus-operator"
PROM_VERSION = "v0.85.0"
FINAL_CONDITIONS = ("ResolutionFailed", "InstallPlanFailed", "BundleUnpackFailed")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def short(text, n):
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


# ---------------------------------------------------------------------------- the catalog


def read_stream(path):
    """The documents of a JSON stream (as `olm catalog render` writes)."""
    text, decoder, pos, docs = Path(path).read_text(), json.JSONDecoder(), 0, []
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return docs
        doc, pos = decoder.raw_decode(text, pos)
        docs.append(doc)


def package_plan(docs):
    """Default channel, its head and the head's install modes, from one package's FBC."""
    pkg = next(d for d in docs if d.get("schema") == "olm.package")
    default = pkg.get("defaultChannel")
    channels = {d["name"]: d for d in docs if d.get("schema") == "olm.channel"}
    if default not in channels:
        raise BenchError(f"default channel {default!r} is not a channel")
    entries = channels[default].get("entries") or []
    replaced = set()
    for e in entries:
        if e.get("replaces"):
            replaced.add(e["replaces"])
        replaced.update(e.get("skips") or [])
    heads = [e["name"] for e in entries if e["name"] not in replaced]
    if len(heads) != 1:
        raise BenchError(f"channel {default} has {len(heads)} heads: {heads}")
    head = heads[0]
    bundle = next((d for d in docs if d.get("schema") == "olm.bundle" and d.get("name") == head), None)
    if bundle is None:
        raise BenchError(f"no bundle {head}")
    modes, version = None, None
    for prop in bundle.get("properties") or []:
        if prop.get("type") == "olm.package":
            version = (prop.get("value") or {}).get("version")
        if prop.get("type") == "olm.csv.metadata" and modes is None:
            modes = (prop.get("value") or {}).get("installModes")
        if prop.get("type") == "olm.bundle.object" and modes is None:
            try:
                obj = json.loads(base64.b64decode((prop.get("value") or {}).get("data", "")))
            except ValueError:
                continue
            if obj.get("kind") == "ClusterServiceVersion":
                modes = (obj.get("spec") or {}).get("installModes") or []
    supported = [m.get("type") for m in modes or [] if m.get("supported")]
    return {"package": pkg.get("name"), "default_channel": default, "head": head, "version": version,
            "install_modes": supported, "blocks_pods": blocks_pods(bundle),
            "bundles": sum(1 for d in docs if d.get("schema") == "olm.bundle")}


def blocks_pods(bundle):
    """The admission webhook of the bundle's CSV that every Pod of the cluster must pass and
    that fails closed, if any: under kwok its server never runs, so once installed no Pod can
    be created anywhere (on either side) and every later install times out. Such packages
    are left out of the Subscriptions (reported), unless --webhooks-on-pods on."""
    for prop in bundle.get("properties") or []:
        if prop.get("type") != "olm.bundle.object":
            continue
        try:
            obj = json.loads(base64.b64decode((prop.get("value") or {}).get("data", "")))
        except ValueError:
            continue
        if obj.get("kind") != "ClusterServiceVersion":
            continue
        for hook in (obj.get("spec") or {}).get("webhookdefinitions") or []:
            if hook.get("type") not in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"):
                continue
            if (hook.get("failurePolicy") or "Fail") != "Fail":
                continue
            for rule in hook.get("rules") or []:
                groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
                if ("" in groups or "*" in groups) and ("pods" in resources or "*" in resources):
                    return hook.get("generateName") or hook.get("name") or "a webhook"
    return None


def operator_group(package, modes):
    """(namespace, target namespaces or None for AllNamespaces, mode) for a package."""
    ns = package if DNS_LABEL.match(package) and len(package) <= 50 else \
        "pkg-" + hashlib.sha1(package.encode()).hexdigest()[:12]
    if "AllNamespaces" in modes or not modes:
        return ns, None, "AllNamespaces" if modes else "AllNamespaces (no install mode supported)"
    if "OwnNamespace" in modes:
        return ns, [ns], "OwnNamespace"
    if "SingleNamespace" in modes:
        return ns, [f"{ns}-target"], "SingleNamespace"
    return ns, [f"{ns}-target1", f"{ns}-target2"], "MultiNamespace"


def render_one(olm, pkg_dir, out_dir):
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "catalog.json"
    with open(out, "wb") as f:
        r = subprocess.run([olm, "catalog", "render", "--image-template", IMAGE_TEMPLATE, pkg_dir],
                           stdout=f, stderr=subprocess.PIPE, text=True, env=server_env())
    if r.returncode != 0:
        return f"render: {tail_error(r.stderr)}", None
    v = subprocess.run([olm, "catalog", "validate", out_dir], capture_output=True, text=True)
    if v.returncode != 0:
        return f"validate: {tail_error(v.stdout + v.stderr)}", None
    try:
        return None, package_plan(read_stream(out))
    except (BenchError, ValueError, KeyError, StopIteration) as e:
        return f"plan: {e}", None


def tail_error(text):
    """The lines that say what is wrong: the last problems a validation lists or the render
    error (not the closing count, not log lines)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    problems = [ln for ln in lines if not re.match(r"error: .* problem\(s\) found", ln)
                and not re.match(r"^\S+\s+(WARN|INFO|DEBUG)\b", ln)]
    keep = problems or lines
    return short(" | ".join(keep[-3:]), 600) or "(no message)"


def prepare_catalog(args, work, olm, opm):
    """Renders and validates each package; the kept ones make work/catalog. Reuses a previous
    render in the same --workdir when the inputs are the same."""
    root = Path(args.catalog_repo) / "operators"
    if not root.is_dir():
        raise BenchError(f"{root} is not a directory (CATALOG_REPO must hold operators/<package>/)")
    packages = sorted(p.name for p in root.iterdir() if p.is_dir())
    if args.packages:
        wanted = [p.strip() for p in args.packages.split(",") if p.strip()]
        missing = [p for p in wanted if p not in packages]
        if missing:
            raise BenchError(f"not in {root}: {', '.join(missing)}")
        packages = sorted(set(wanted))
    key = {"repo": str(Path(args.catalog_repo).resolve()), "packages": packages, "olm": str(olm),
           "olm_mtime": os.stat(olm).st_mtime, "template": IMAGE_TEMPLATE,
           "plan": 3}  # bumped when package_plan() records more
    state = work / "catalog-plan.json"
    if state.exists():
        saved = json.loads(state.read_text())
        if saved.get("key") == key and (work / "catalog").is_dir():
            log(f"reusing the rendered catalog in {work / 'catalog'}")
            return saved
    for d in ("render", "catalog", "catalog-opm"):
        shutil.rmtree(work / d, ignore_errors=True)
    log(f"rendering and validating {len(packages)} packages of {root}")
    started = time.time()
    plans, dropped = {}, {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(render_one, olm, root / p, work / "render" / p): p for p in packages}
        for i, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            p = futures[fut]
            error, plan = fut.result()
            if error:
                dropped[p] = error
                shutil.rmtree(work / "render" / p, ignore_errors=True)
            else:
                plans[p] = plan
            if i % 50 == 0:
                log(f"  {i}/{len(packages)} packages done ({len(dropped)} dropped)")
    (work / "catalog").mkdir()
    for p in plans:
        (work / "render" / p).rename(work / "catalog" / p)
    shutil.rmtree(work / "render", ignore_errors=True)
    render_seconds = time.time() - started
    log(f"catalog: {len(plans)} packages kept, {len(dropped)} dropped, in {render_seconds:.0f} s")
    notes = []
    v = subprocess.run([olm, "catalog", "validate", work / "catalog"], capture_output=True, text=True)
    if v.returncode != 0:
        raise BenchError(f"olm catalog validate refuses the kept packages together: {tail_error(v.stdout + v.stderr)}")
    # opm must accept what upstream serves: packages it refuses are left out of upstream's copy.
    opm_refused = {}
    log("checking the catalog with opm validate")
    v = subprocess.run([opm, "validate", work / "catalog"], capture_output=True, text=True, env=server_env())
    if v.returncode != 0:
        log("opm validate refuses the catalog; checking each package")
        for p in sorted(plans):
            pv = subprocess.run([opm, "validate", work / "catalog" / p], capture_output=True, text=True,
                                env=server_env())
            if pv.returncode != 0:
                opm_refused[p] = tail_error(pv.stdout + pv.stderr)
        if not opm_refused:
            raise BenchError(f"opm validate refuses the catalog but no package alone: {tail_error(v.stdout + v.stderr)}")
        for p in sorted(plans):
            if p in opm_refused:
                continue
            (work / "catalog-opm" / p).mkdir(parents=True)
            os.link(work / "catalog" / p / "catalog.json", work / "catalog-opm" / p / "catalog.json")
        notes.append(f"opm validate refuses {len(opm_refused)} package(s) olm accepts; left out of upstream's catalog")
    saved = {"key": key, "plans": plans, "dropped": dropped, "opm_refused": opm_refused, "notes": notes,
             "render_seconds": render_seconds, "bundles": sum(p["bundles"] for p in plans.values())}
    state.write_text(json.dumps(saved, indent=1))
    return saved


def monitoring_crds():
    """prometheus-operator's CRDs (example/prometheus-operator-crd of the Go module), cached."""
    cache = CACHE / f"prometheus-operator-crds-{PROM_VERSION}"
    if cache.is_dir() and any(cache.glob("*.yaml")):
        return cache
    log(f"downloading {PROM_MODULE}@{PROM_VERSION} for its CRDs")
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(["go", "mod", "download", "-json", f"{PROM_MODULE}@{PROM_VERSION}"], cwd=tmp,
                           env=dict(os.environ, GOFLAGS="-mod=mod"), capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"go mod download {PROM_MODULE}@{PROM_VERSION} failed: {r.stdout[-1000:]} {r.stderr[-1000:]}")
    src = Path(json.loads(r.stdout)["Dir"]) / "example/prometheus-operator-crd"
    files = sorted(src.glob("*.yaml"))
    if not files:
        raise BenchError(f"no CRDs in {src}")
    tmp_cache = cache.with_name(cache.name + ".tmp")
    shutil.rmtree(tmp_cache, ignore_errors=True)
    tmp_cache.mkdir(parents=True)
    for f in files:
        shutil.copy(f, tmp_cache / f.name)
    tmp_cache.rename(cache)
    return cache


# ---------------------------------------------------------------------------- API access


class Watch(threading.Thread):
    """A cluster-wide list+watch of one resource, kept going (re-watch from the last
    resourceVersion, re-list on 410); every object seen goes to on_event(type, obj, time)."""

    def __init__(self, api, path, on_event, selector=None):
        super().__init__(daemon=True)
        self.api, self.path, self.on_event = api, path, on_event
        self.query = f"labelSelector={selector}" if selector else ""
        self.ready = threading.Event()
        self.stop = False
        self.conn = None
        self.error = None
        self.restarts = 0

    def run(self):
        rv = None
        while not self.stop:
            try:
                if rv is None:
                    listing = self.api.get(f"{self.path}?{self.query}")
                    rv = listing["metadata"]["resourceVersion"]
                    for item in listing.get("items") or []:
                        self.on_event("ADDED", item, time.time())
                c = self.api.conn(timeout=30)
                c.request("GET", f"{self.path}?watch=1&allowWatchBookmarks=true&timeoutSeconds=240"
                          f"&resourceVersion={rv}&{self.query}",
                          headers={"User-Agent": BENCH_UA, "Accept": "application/json"})
                r = c.getresponse()
                if r.status == 410:
                    rv = None
                    c.close()
                    continue
                if r.status != 200:
                    raise BenchError(f"watch {self.path}: {r.status} {r.read()[:300]!r}")
                c.sock.settimeout(None)
                self.conn = c
                self.ready.set()
                while not self.stop:
                    line = r.readline()
                    if not line:
                        break
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        if obj.get("code") == 410:
                            rv = None
                        break
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if event.get("type") != "BOOKMARK":
                        self.on_event(event["type"], obj, time.time())
                c.close()
            except Exception as e:  # noqa: BLE001  retried; the last one is reported
                if self.stop:
                    return
                self.error = e
                self.restarts += 1
                time.sleep(1)

    def close(self):
        self.stop = True
        if self.conn is not None:
            try:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
            except (OSError, AttributeError):  # no socket: the connection was never made
                pass
            self.conn.close()


class AuditStream:
    """The audit log, read up to its end on demand (the API server rotates it at 1 GiB and
    keeps the rotated files: each file is read on from where it was left), keeping OLM's
    requests only, in install.py's record shape (received, verb, user agent, resource,
    namespace, name, code). Read only before the clock and after the run: parsing it while
    the run goes would take CPU from the side being measured."""

    def __init__(self, path):
        self.path = Path(path)
        self.offsets = {}  # inode -> bytes read
        self.ids = set()
        self.records = []
        self.latest = 0.0
        self.sub_creates = []  # times kubectl's Subscription creates were received

    def read(self):
        rotated = sorted(self.path.parent.glob("audit-*.log"), key=lambda f: f.stat().st_mtime)
        for path in [*rotated, self.path]:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            if st.st_size > self.offsets.get(st.st_ino, 0):
                self.offsets[st.st_ino] = self._read_file(path, self.offsets.get(st.st_ino, 0))

    def _read_file(self, path, offset):
        with open(path, "rb") as f:
            f.seek(offset)
            while True:
                data = f.read(64 << 20)
                end = data.rfind(b"\n") + 1
                if end == 0:
                    return offset  # nothing, or a partial last line: read again later
                offset += end
                f.seek(offset)
                for line in data[:end].splitlines():
                    self._record(line)

    def _record(self, line):
        try:
            ev = json.loads(line)
        except ValueError:
            return
        ts = ib.parse_ts(ev["requestReceivedTimestamp"])
        self.latest = max(self.latest, ts)
        ua = ev.get("userAgent", "")
        ref = ev.get("objectRef") or {}
        resource = ref.get("resource") or ev.get("requestURI", "").split("?")[0]
        if ua.startswith("kubectl") and ev["verb"] == "create" and resource == "subscriptions":
            if ev["auditID"] not in self.ids:
                self.ids.add(ev["auditID"])
                self.sub_creates.append(ts)
            return
        if any(ua.startswith(p) for p in ib.NOT_OLM) or ev["auditID"] in self.ids:
            return
        self.ids.add(ev["auditID"])
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        self.records.append((ts, ev["verb"], ua, resource, ref.get("namespace", ""), ref.get("name", ""),
                             (ev.get("responseStatus") or {}).get("code")))

    def catch_up(self, until, poke):
        poke()
        deadline = time.time() + 10
        while True:
            self.read()
            if self.latest >= until or time.time() > deadline:
                return
            time.sleep(0.2)

    def window(self, start, end):
        return [r for r in self.records if start <= r[0] < end]


def summarize(records):
    agents = collections.Counter((ib.short_ua(r[2]) or "(no user agent)", r[1]) for r in records)
    writes = collections.Counter((r[1], r[3]) for r in records if r[1] in ib.WRITE_VERBS)
    return {"requests": len(records), "writes": sum(writes.values()),
            "by_agent_verb": {f"{a} {v}": n for (a, v), n in sorted(agents.items())},
            "writes_by_resource": {f"{v} {res}": n for (v, res), n in sorted(writes.items(), key=lambda kv: -kv[1])}}


# ---------------------------------------------------------------------------- outcomes


def classify(sub, csv):
    """(category, key, detail, final) of one package from its Subscription and current CSV."""
    if sub is None:
        return "stuck", "stuck: no Subscription", "the Subscription is not there", False
    status = sub.get("status") or {}
    if csv is not None:
        phase, reason, message = csv["phase"], csv["reason"], csv["message"]
        if phase == "Succeeded":
            return "Succeeded", "Succeeded", "", True
        if phase == "Failed":
            return "Failed", f"Failed {reason}", f"{reason}: {message}", True
        return "stuck", f"stuck CSV {phase} {reason}", f"CSV {csv['name']} {phase or '(no phase)'} {reason}: {message}", False
    conds = {c.get("type"): c for c in status.get("conditions") or [] if c.get("status") == "True"}
    for t in FINAL_CONDITIONS:
        if t in conds:
            c = conds[t]
            return "stuck", f"stuck {t}", f"{t} ({c.get('reason', '')}): {c.get('message', '')}", True
    current = status.get("currentCSV")
    extra = "; ".join(f"{t} ({c.get('reason', '')}): {c.get('message', '')}" for t, c in conds.items())
    what = f"no CSV {current} yet" if current else "no CSV"
    return "stuck", f"stuck {'no CSV yet' if current else 'no CSV'} {status.get('state', '')}".strip(), \
        f"{what}; Subscription state {status.get('state') or '(none)'}" + (f"; {extra}" if extra else ""), False


class Tracker:
    """Subscriptions and CSVs of the packages' namespaces, from the watches; each package's
    outcome recomputed on every event, with the time it last changed."""

    def __init__(self, packages):
        self.lock = threading.Lock()
        self.by_ns = {info["namespace"]: pkg for pkg, info in packages.items()}
        self.subs = {}   # ns -> Subscription (the package's)
        self.csvs = {}   # (ns, name) -> compact CSV
        self.outcome = {pkg: classify(None, None) for pkg in packages}
        self.changed = {pkg: None for pkg in packages}
        self.history = {pkg: [] for pkg in packages}
        self.last_change = None
        self.start = None

    def on_sub(self, etype, obj, now):
        ns, name = obj["metadata"].get("namespace"), obj["metadata"]["name"]
        pkg = self.by_ns.get(ns)
        if pkg is None or name != pkg:
            return
        with self.lock:
            self.subs[ns] = None if etype == "DELETED" else {"status": obj.get("status") or {}}
            self.update(pkg, ns, now)

    def on_csv(self, etype, obj, now):
        ns, name = obj["metadata"].get("namespace"), obj["metadata"]["name"]
        pkg = self.by_ns.get(ns)
        if pkg is None:
            return
        st = obj.get("status") or {}
        with self.lock:
            if etype == "DELETED":
                self.csvs.pop((ns, name), None)
            else:
                self.csvs[(ns, name)] = {"name": name, "phase": st.get("phase", ""), "reason": st.get("reason", ""),
                                         "message": st.get("message", "")}
            self.update(pkg, ns, now)

    def current_csv(self, ns):
        status = (self.subs.get(ns) or {}).get("status") or {}
        for name in (status.get("currentCSV"), status.get("installedCSV")):
            if name and (ns, name) in self.csvs:
                return self.csvs[(ns, name)]
        return None

    def update(self, pkg, ns, now):
        new, old = classify(self.subs.get(ns), self.current_csv(ns)), self.outcome[pkg]
        self.outcome[pkg] = new  # the detail (a message) may change alone: not a change of outcome
        if (new[0], new[1], new[3]) != (old[0], old[1], old[3]):
            self.changed[pkg] = now
            self.last_change = now
            if self.start is not None:
                self.history[pkg].append((round(now - self.start, 3), new[1]))

    def counts(self):
        with self.lock:
            return collections.Counter(o[0] + ("" if o[3] else " (pending)") for o in self.outcome.values())


# ---------------------------------------------------------------------------- sides


class CatalogSide:
    """Mixed in before install.Upstream / install.Ours: their prepare() and start() (CRDs,
    catalog server, OLM processes), with this run() instead of the single install."""

    # A large catalog takes opm serve (and olm catalog serve) longer than install.py's 120 s
    # to start listening.
    server_timeout = 1800

    def __init__(self, args, workdir, catalog, plans):
        super().__init__(args, workdir)
        self.catalog = catalog
        self.plans = plans
        self.cluster = Cluster(f"catalog-{self.name}", side=self.name)

    def hwm(self):
        self.sample_rss()
        return ({k: self.peak_hwm.get(k, 0) / 1024 for k in self.olm_pids},
                self.peak_hwm.get("catalog server", 0) / 1024)

    def sample_rss(self):
        """Peak RSS: each process's VmHWM (kept while it lives) and the peak of the OLM
        processes' summed VmRSS."""
        total = sum(proc_status(pid).get("VmRSS", 0) for pid in self.olm_pids.values()) / 1024
        self.peak_rss_sum = max(self.peak_rss_sum, total)
        for k, pid in [*self.olm_pids.items(), ("catalog server", self.server_pid)]:
            hwm = proc_status(pid).get("VmHWM") if pid else None
            if hwm:
                self.peak_hwm[k] = max(self.peak_hwm.get(k, 0), hwm)

    def create(self, items, what, batch=100):
        for i in range(0, len(items), batch):
            self.cluster.kubectl("create", "-f", "-", stdin=json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": items[i:i + batch]}))
        log(f"{self.name}: created {len(items)} {what}")

    def run(self):
        args, k = self.args, self.cluster.kubectl
        self.peak_rss_sum, self.peak_hwm = 0.0, {}
        self.cluster.up(nodes=args.nodes)
        self.api = Api(self.cluster.kubeconfig, self.workdir)
        self.audit = AuditStream(self.cluster.audit_log)
        k("create", "namespace", GLOBAL_NS)
        k("apply", "--server-side", "-f", monitoring_crds())
        self.start()
        self.check_alive()
        # When the first OLM process started (start() also copies and serves the catalog first).
        olm_started = min(proc_started(pid) or time.time() for pid in self.olm_pids.values())
        log(f"{self.name}: OLM started; CatalogSource {GLOBAL_NS}/{CATALOG_NAME} at {self.address}")
        k("create", "-f", "-", stdin=json.dumps(
            {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
             "metadata": {"name": CATALOG_NAME, "namespace": GLOBAL_NS},
             "spec": {"sourceType": "grpc", "address": self.address, "displayName": "community operators",
                      "publisher": "bench"}}))
        cs_path = f"/apis/operators.coreos.com/v1alpha1/namespaces/{GLOBAL_NS}/catalogsources/{CATALOG_NAME}"
        deadline = time.time() + 900
        while ((((self.api.get(cs_path) or {}).get("status") or {}).get("connectionState") or {})
               .get("lastObservedState")) != "READY":
            self.check_alive()
            if time.time() > deadline:
                raise BenchError(f"{self.name}: CatalogSource not READY after 900 s")
            time.sleep(0.5)
        log(f"{self.name}: CatalogSource READY {time.time() - olm_started:.1f} s after OLM started")

        # Namespaces and OperatorGroups, ready before the clock starts.
        packages = {}
        namespaces, groups = [], []
        chosen = set(self.args.subscribe.split(",")) if self.args.subscribe else None
        for pkg, plan in sorted(self.plans.items()):
            if chosen is not None and pkg not in chosen:
                continue
            if plan.get("blocks_pods") and self.args.webhooks_on_pods == "off" and chosen is None:
                self.notes.append(f"not subscribed: {pkg} (its webhook {plan['blocks_pods']} on every Pod "
                                  f"fails closed, and kwok runs no webhook server)")
                continue
            ns, targets, mode = operator_group(pkg, plan["install_modes"])
            packages[pkg] = {"namespace": ns, "targets": targets, "mode": mode}
            for name in [ns, *(t for t in targets or [] if t != ns)]:
                namespaces.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            spec = {} if targets is None else {"targetNamespaces": targets}
            groups.append({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                           "metadata": {"name": ns, "namespace": ns}, "spec": spec})
        self.create(namespaces, "namespaces")
        self.create(groups, "OperatorGroups")
        deadline = time.time() + 600
        while True:
            items = self.api.get("/apis/operators.coreos.com/v1/operatorgroups").get("items") or []
            ready = sum(1 for g in items if (g.get("status") or {}).get("namespaces") is not None)
            if ready >= len(groups):
                break
            self.check_alive()
            if time.time() > deadline:
                self.notes.append(f"only {ready}/{len(groups)} OperatorGroups had status.namespaces after 600 s")
                break
            time.sleep(1)
        self.wait_quiet("the packages' namespaces", timeout=120)

        tracker = Tracker(packages)
        watches = [Watch(self.api, "/apis/operators.coreos.com/v1alpha1/subscriptions", tracker.on_sub),
                   Watch(self.api, "/apis/operators.coreos.com/v1alpha1/clusterserviceversions", tracker.on_csv,
                         selector="!olm.copiedFrom")]
        for w in watches:
            w.start()
        for w in watches:
            if not w.ready.wait(60):
                raise BenchError(f"watch {w.path} not started: {w.error}")
        subs = [{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                 "metadata": {"name": pkg, "namespace": info["namespace"]},
                 # the package's name in its bundles, which is not always its folder's
                 "spec": {"name": self.plans[pkg].get("package") or pkg,
                          "channel": self.plans[pkg]["default_channel"], "source": CATALOG_NAME,
                          "sourceNamespace": GLOBAL_NS, "installPlanApproval": "Automatic"}}
                for pkg, info in sorted(packages.items())]
        launched = time.time()
        tracker.start = launched
        tracker.last_change = launched
        self.cluster.kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": subs}))
        log(f"{self.name}: {len(subs)} Subscriptions created in {time.time() - launched:.1f} s; waiting "
            f"(timeout {args.timeout:g} s, quiet {args.quiet:g} s)")

        # Until settled.
        deadline, next_log, ended_by = launched + args.timeout, launched + 30, None
        while True:
            time.sleep(1)
            try:
                self.check_alive()
            except BenchError as e:  # the outcomes so far are still worth reporting
                ended_by = f"an OLM process exited: {short(e, 1500)}"
                self.notes.append(ended_by)
                log(f"{self.name}: {ended_by}")
                break
            now = time.time()
            self.sample_rss()
            with tracker.lock:
                all_final = all(o[3] for o in tracker.outcome.values())
                last = tracker.last_change
            if all_final and now - last >= args.confirm:
                ended_by = "all final"
                break
            if now - last >= args.quiet:
                ended_by = f"nothing changed for {args.quiet:g} s"
                break
            if now >= deadline:
                ended_by = f"timeout ({args.timeout:g} s)"
                break
            if now >= next_log:
                c = tracker.counts()
                log(f"{self.name}: +{now - launched:.0f} s: " + ", ".join(f"{n} {k}" for k, n in sorted(c.items())))
                next_log = now + 30
        ended = time.time()
        for w in watches:
            w.close()
        self.sample_rss()
        olm_hwm, server_hwm = self.hwm()
        log(f"{self.name}: ended ({ended_by}) {ended - launched:.1f} s after the creates")

        listing = self.api.get("/apis/operators.coreos.com/v1alpha1/clusterserviceversions"
                               "?labelSelector=olm.copiedFrom&limit=1") or {}
        copied = len(listing.get("items") or []) + ((listing.get("metadata") or {}).get("remainingItemCount") or 0)

        # No CSV: the InstallPlan says more.
        outcomes = {}
        for pkg, info in sorted(packages.items()):
            cat, key, detail, final = tracker.outcome[pkg]
            ns = info["namespace"]
            sub_status = (tracker.subs.get(ns) or {}).get("status") or {}
            if cat != "Succeeded" and tracker.current_csv(ns) is None:
                ref = (sub_status.get("installPlanRef") or {}).get("name")
                if ref:
                    ip = self.api.get(f"/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/installplans/{ref}") or {}
                    ips = ip.get("status") or {}
                    msgs = [f"{c.get('type')} {c.get('reason', '')}: {c.get('message', '')}"
                            for c in ips.get("conditions") or [] if c.get("status") == "False" or c.get("message")]
                    detail += f"; InstallPlan {ref} phase {ips.get('phase') or '(none)'}" + (f" ({'; '.join(msgs)})" if msgs else "")
                    if ips.get("phase") == "Failed" and "InstallPlanFailed" not in key:
                        key += " InstallPlan Failed"
            changed = tracker.changed[pkg]
            outcomes[pkg] = {"category": cat, "key": key, "detail": detail, "final": final,
                             "changed_at": None if changed is None else round(changed - launched, 3),
                             "current_csv": sub_status.get("currentCSV"), "history": tracker.history[pkg],
                             "operator_group": info["mode"], "namespace": ns}
            if self.name == "upstream" and pkg in self.opm_refused:
                outcomes[pkg]["detail"] += f" [left out of upstream's catalog: opm validate refuses it: {self.opm_refused[pkg]}]"

        # Requests: from the first create (audit) to settled, and over the whole run.
        self.audit.catch_up(ended, self.poke)
        created = min(self.audit.sub_creates) if self.audit.sub_creates else launched
        changes = [t for t in tracker.changed.values() if t is not None]
        succeeded = [launched + o["changed_at"] for o in outcomes.values()
                     if o["category"] == "Succeeded" and o["changed_at"] is not None]
        settled_at = max(changes) if changes else created
        all_final = all(o["final"] for o in outcomes.values())
        result = {
            "side": self.name, "label": self.label, "ended_by": ended_by, "all_final": all_final,
            "packages": len(packages), "subscription_creates_seen": len(self.audit.sub_creates),
            "seconds_to_settled": round(settled_at - created, 3),
            "seconds_to_last_succeeded": round(max(succeeded) - created, 3) if succeeded else None,
            "seconds_observed": round(ended - created, 3),
            "seconds_olm_start_to_creates": round(created - olm_started, 3),
            "peak_rss_mib": {"olm_processes_hwm": {k: round(v, 1) for k, v in olm_hwm.items()},
                             "olm_total_hwm": round(sum(olm_hwm.values()), 1),
                             "olm_total_sampled_peak": round(self.peak_rss_sum, 1),
                             "catalog_server_hwm": round(server_hwm, 1)},
            "requests_to_settled": summarize(self.audit.window(created, settled_at + 0.001)),
            "requests_whole_run": summarize(self.audit.window(olm_started, ended)),
            "counts": dict(collections.Counter(o["category"] for o in outcomes.values())),
            "watch_restarts": sum(w.restarts for w in watches), "copied_csvs_at_end": copied,
            "outcomes": outcomes, "notes": self.notes,
        }
        return result


class UpstreamSide(CatalogSide, ib.Upstream):
    def start(self):
        super().start()
        if self.args.copied_csvs == "off":  # upstream's switch: the OLMConfig named cluster
            self.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps(
                {"apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "metadata": {"name": "cluster"},
                 "spec": {"features": {"disableCopiedCSVs": True}}}))
            self.notes.append("copied CSVs disabled: OLMConfig cluster spec.features.disableCopiedCSVs=true")


class OursSide(CatalogSide, ib.Ours):
    def start(self):
        if self.args.copied_csvs == "off":  # ours: --disable-copied-csvs, through its variable
            os.environ["OLM_DISABLE_COPIED_CSVS"] = "true"
            self.notes.append("copied CSVs disabled: OLM_DISABLE_COPIED_CSVS=true (--disable-copied-csvs)")
        try:
            super().start()
        finally:
            os.environ.pop("OLM_DISABLE_COPIED_CSVS", None)


# ---------------------------------------------------------------------------- report


def cell(o):
    if o is None:
        return "—"
    if o["category"] == "Succeeded":
        return "Succeeded"
    text = o["key"] if o["category"] == "Failed" else o["key"].replace("stuck ", "stuck: ", 1)
    return text + ("" if o["final"] else " (pending)")


def differences(results):
    """(category differs, same category but another key) between ours and upstream."""
    ours, up = results["sides"]["ours"]["outcomes"], results["sides"]["upstream"]["outcomes"]
    cat, key = [], []
    for pkg in sorted(set(ours) | set(up)):
        a, b = ours.get(pkg), up.get(pkg)
        if a is None or b is None:
            continue
        if a["category"] != b["category"]:
            cat.append(pkg)
        elif a["key"] != b["key"]:
            key.append(pkg)
    return cat, key


def report(results, out=sys.stdout):
    p = lambda *a: print(*a, file=out)  # noqa: E731
    cat = results.get("catalog") or {}
    sides = [s for s in ("ours", "upstream") if s in results["sides"]]
    res = results["sides"]
    p(f"Install of every package of {cat.get('repo', '?')} through a Subscription, all at once")
    p(f"  catalog: {len(cat.get('plans') or {})} packages kept ({cat.get('bundles', '?')} bundles), "
      f"{len(cat.get('dropped') or {})} dropped (render or validate)")
    for s in sides:
        p(f"  {res[s]['label']}: ended by {res[s]['ended_by']}")
    p("")
    pkgs = sorted(set().union(*(res[s]["outcomes"] for s in sides)))
    header = ["package", *(s for s in sides)]
    rows = [header] + [[pkg, *(short(cell(res[s]["outcomes"].get(pkg)), 70) for s in sides)] for pkg in pkgs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    p("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    p("  ".join("-" * w for w in widths))
    for r in rows[1:]:
        p("  ".join(c.ljust(w) for c, w in zip(r, widths)))

    p("\nSummary")
    cats = ["Succeeded", "Failed", "stuck"]
    lines = [["", *(res[s]["label"] for s in sides)]]
    for c in cats:
        lines.append([c, *(str(res[s]["counts"].get(c, 0)) for s in sides)])
    lines.append(["  of which not final (pending at the end)",
                  *(str(sum(1 for o in res[s]["outcomes"].values() if not o["final"])) for s in sides)])
    lines.append(["time, first create → all settled (s)",
                  *(f"{res[s]['seconds_to_settled']:.1f}" + ("" if res[s]["all_final"] else " (last change; not all final)")
                    for s in sides)])
    lines.append(["time, first create → the last Succeeded (s)", *(
        "—" if res[s].get("seconds_to_last_succeeded") is None else f"{res[s]['seconds_to_last_succeeded']:.1f}"
        for s in sides)])
    lines.append(["time observed after the first create (s)", *(f"{res[s]['seconds_observed']:.1f}" for s in sides)])
    lines.append(["OLM start → first create (s; catalog load, groups)",
                  *(f"{res[s]['seconds_olm_start_to_creates']:.1f}" for s in sides)])
    lines.append(["peak RSS of OLM, sum of VmHWM (MiB)", *(
        f"{res[s]['peak_rss_mib']['olm_total_hwm']:.1f} (" + ", ".join(
            f"{k} {v:.1f}" for k, v in res[s]["peak_rss_mib"]["olm_processes_hwm"].items()) + ")" for s in sides)])
    lines.append(["peak of summed VmRSS, sampled 1/s (MiB)",
                  *(f"{res[s]['peak_rss_mib']['olm_total_sampled_peak']:.1f}" for s in sides)])
    lines.append(["copied CSVs at the end", *(str(res[s].get("copied_csvs_at_end", "?")) for s in sides)])
    lines.append(["catalog server peak RSS (MiB)", *(f"{res[s]['peak_rss_mib']['catalog_server_hwm']:.1f}" for s in sides)])
    lines.append(["OLM requests, first create → settled",
                  *(f"{res[s]['requests_to_settled']['requests']} ({res[s]['requests_to_settled']['writes']} writes)" for s in sides)])
    lines.append(["OLM requests, whole run (from OLM start)",
                  *(f"{res[s]['requests_whole_run']['requests']} ({res[s]['requests_whole_run']['writes']} writes)" for s in sides)])
    widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
    for r in lines:
        p("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    for s in sides:
        w = res[s]["requests_to_settled"]
        p(f"\n{res[s]['label']}: requests to settled by client and verb: "
          + ", ".join(f"{k} {n}" for k, n in w["by_agent_verb"].items()))
        p("  writes by resource: " + ", ".join(f"{k} {n}" for k, n in list(w["writes_by_resource"].items())[:15]))
        for note in res[s]["notes"]:
            p(f"  note: {note}")

    if len(sides) == 2:
        by_cat, by_key = differences(results)
        final = lambda pkg: res["ours"]["outcomes"][pkg]["final"] and res["upstream"]["outcomes"][pkg]["final"]  # noqa: E731
        pending = [pkg for pkg in by_cat if not final(pkg)]
        by_cat = [pkg for pkg in by_cat if final(pkg)]
        p(f"\nOutcome differs between the sides, both final ({len(by_cat)} packages):")
        for pkg in by_cat:
            a, b = res["ours"]["outcomes"][pkg], res["upstream"]["outcomes"][pkg]
            p(f"- {pkg}  [operator group: {a['operator_group']}]")
            p(f"    ours:     {cell(a)}" + (f" — {short(a['detail'], 700)}" if a["detail"] else ""))
            p(f"    upstream: {cell(b)}" + (f" — {short(b['detail'], 700)}" if b["detail"] else ""))
        p(f"\nOutcome differs, one side still pending at the end ({len(pending)} packages):")
        for pkg in pending:
            a, b = res["ours"]["outcomes"][pkg], res["upstream"]["outcomes"][pkg]
            p(f"- {pkg}")
            p(f"    ours:     {cell(a)}" + (f" — {short(a['detail'], 400)}" if a["detail"] else ""))
            p(f"    upstream: {cell(b)}" + (f" — {short(b['detail'], 400)}" if b["detail"] else ""))
        p(f"\nSame outcome, another reason or stage ({len(by_key)} packages):")
        for pkg in by_key:
            a, b = res["ours"]["outcomes"][pkg], res["upstream"]["outcomes"][pkg]
            p(f"- {pkg}")
            p(f"    ours:     {cell(a)} — {short(a['detail'], 500)}")
            p(f"    upstream: {cell(b)} — {short(b['detail'], 500)}")
        both = collections.defaultdict(list)
        for pkg in pkgs:
            a, b = res["ours"]["outcomes"].get(pkg), res["upstream"]["outcomes"].get(pkg)
            if a and b and a["category"] != "Succeeded" and b["category"] != "Succeeded":
                both[f"ours {cell(a)} | upstream {cell(b)}"].append(pkg)
        p(f"\nNot Succeeded on both sides ({sum(map(len, both.values()))} packages), grouped:")
        for group, members in sorted(both.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            p(f"- {group}: {len(members)}")
            for pkg in members:
                p(f"    {pkg}: {short(res['upstream']['outcomes'][pkg]['detail'], 300)}")
    dropped = cat.get("dropped") or {}
    if dropped:
        p(f"\nDropped from the catalog ({len(dropped)}):")
        for pkg, why in sorted(dropped.items()):
            p(f"- {pkg}: {short(why, 400)}")
    if cat.get("opm_refused"):
        p(f"\nLeft out of upstream's catalog, refused by opm validate ({len(cat['opm_refused'])}):")
        for pkg, why in sorted(cat["opm_refused"].items()):
            p(f"- {pkg}: {short(why, 400)}")


# ---------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("catalog_repo", nargs="?", help="checkout of community-operators-prod (holds operators/)")
    ap.add_argument("--side", choices=["both", "upstream", "ours"], default="both")
    ap.add_argument("--packages", help="comma-separated subset of packages")
    ap.add_argument("--subscribe", help="comma-separated packages to subscribe to (default all); the catalog "
                    "still holds every package (or --packages), so dependencies resolve")
    ap.add_argument("--timeout", type=float, default=600, help="seconds after the first create at most (default 600)")
    ap.add_argument("--quiet", type=float, default=180,
                    help="end when no outcome changed for this many seconds (default 180)")
    ap.add_argument("--confirm", type=float, default=15,
                    help="when all are final, seconds without change before ending (default 15)")
    ap.add_argument("--copied-csvs", choices=["on", "off"], default="off",
                    help="copied CSVs of AllNamespaces operators (default off: see above)")
    ap.add_argument("--webhooks-on-pods", choices=["on", "off"], default="off",
                    help="subscribe to packages whose fail-closed admission webhook covers every Pod "
                         "(default off: under kwok it blocks every Pod of the cluster; --subscribe overrides)")
    ap.add_argument("--nodes", type=int, default=10, help="kwok nodes per control plane (110 pods each; default 10)")
    ap.add_argument("--jobs", type=int, default=2, help="packages rendered at once (default 2)")
    ap.add_argument("--olm", default=str(REPO / "target/release/olm"), help="our binary (default target/release/olm)")
    ap.add_argument("--workdir", help="keep the rendered catalog and logs here (reused when the inputs are the same)")
    ap.add_argument("--keep-logs", action="store_true", help="keep the temporary work directory")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    ap.add_argument("--json-file", help="also write the results as JSON to this file")
    ap.add_argument("--from-json", nargs="+", metavar="FILE", help="print the report of saved results (sides merged)")
    args = ap.parse_args()

    if args.from_json:
        merged = None
        for f in args.from_json:
            data = json.loads(Path(f).read_text())
            if merged is None:
                merged = data
            else:
                merged["sides"].update(data["sides"])
        if args.json:
            print(json.dumps(merged, indent=1))
        else:
            report(merged)
        return
    if not args.catalog_repo:
        ap.error("CATALOG_REPO is required")

    interrupt_on_signals()

    if args.workdir:
        work = Path(args.workdir).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="olm-bench-install-catalog-"))
    olm = Path(args.olm).resolve()
    names = ["ours", "upstream"] if args.side == "both" else [args.side]
    results = {"catalog": None, "sides": {}}
    failure, keep = None, bool(args.keep_logs or args.workdir)
    sides = []
    try:
        if not os.access(olm, os.X_OK):
            raise BenchError(f"no {olm}: run cargo build --release --bin olm")
        opm = opm_path()
        monitoring_crds()
        catalog = prepare_catalog(args, work, olm, opm)
        results["catalog"] = {"repo": str(Path(args.catalog_repo).resolve()), **{k: v for k, v in catalog.items() if k != "key"}}
        if not catalog["plans"]:
            raise BenchError("no package rendered and validated")
        if args.subscribe:
            unknown = set(args.subscribe.split(",")) - set(catalog["plans"])
            if unknown:
                raise BenchError(f"--subscribe: not in the catalog: {', '.join(sorted(unknown))}")
        upstream_catalog = work / ("catalog-opm" if catalog["opm_refused"] else "catalog")
        for n in names:
            shutil.rmtree(work / n, ignore_errors=True)
            kind = OursSide if n == "ours" else UpstreamSide
            side = kind(args, work, work / "catalog" if n == "ours" else upstream_catalog, catalog["plans"])
            side.opm_refused = catalog["opm_refused"]
            sides.append(side)
        for side in sides:
            side.prepare()
        for side in sides:
            try:
                results["sides"][side.name] = side.run()
            except BenchError:
                keep = True
                raise
            finally:
                side.teardown()
            if args.json_file:  # after each side, so that a later failure keeps this one
                Path(args.json_file).write_text(json.dumps(results, indent=1))
    except BenchError as e:
        failure = str(e)
    except KeyboardInterrupt:
        failure, keep = "interrupted", True
    finally:
        ignore_signals()
        for side in sides:
            side.teardown()
        if keep:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if results["sides"]:
        if args.json_file:
            Path(args.json_file).write_text(json.dumps(results, indent=1))
        if args.json:
            print(json.dumps(results, indent=1))
        else:
            report(results)
    if failure:
        print(f"\nerror: {failure}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
