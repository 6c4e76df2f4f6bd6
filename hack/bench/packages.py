#!/usr/bin/env python3
"""Benchmark: the packagemanifests API, `olm run --packages-address` (ours) against upstream's
package-server v0.46.0, each registered in turn on the running control plane: list and get
latency through the kube-apiserver and asked directly, RSS, what the API costs `olm run`, and
change → watch event. Method: hack/bench/README.md.

Usage: hack/bench/packages.py [--side ours|upstream|both] [--runs 20] [--sets ours,testdata,large]
           [--community DIR]
       (needs the control plane from hack/cluster/up, an `olm` build: target/release/olm, else
       target/debug/olm; upstream: hack/upstream-olm/build)
"""
import argparse, http.client, json, os, shutil, ssl, statistics, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    ENV, KUBECONFIG, REPO, credentials, exit_on_error, free_port, kubectl, metric, replicated_catalog,
    rss_mib, split_json_stream, stop, testdata_packages, wait_port,
)

API = "/apis/packages.operators.coreos.com/v1"


# What `kubectl get` asks for: a server-side printed Table, in pages of 500.
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


def timed_get(ctx, base, path, accept="application/json"):
    start = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(base + path, headers={"Accept": accept}),
                                context=ctx, timeout=300) as r:
        body = r.read()
    return time.perf_counter() - start, body


class Direct:
    """Requests straight to a serving process, as the kube-apiserver's aggregator makes them:
    its front-proxy client certificate and the user in X-Remote-* headers (an admin, so the
    server's authorization allows it), over one kept-alive connection. curl makes them when
    it is installed (a client of a few tens of microseconds a request, where Python's
    http.client takes about a hundred, more than a small list costs either server)."""

    HEADERS = {"X-Remote-User": "bench-admin", "X-Remote-Group": "system:masters"}

    def __init__(self, port):
        pki = Path(KUBECONFIG).parent / "pki"
        self.port, self.cert, self.key = port, pki / "front-proxy-client.crt", pki / "front-proxy-client.key"
        self.curl = shutil.which("curl")
        self.conn = None

    def timed_gets(self, path, runs, accept="application/json"):
        """Seconds of each of `runs` GETs, after two not counted (connection, warm-up)."""
        if self.curl:
            url = f"https://127.0.0.1:{self.port}{path}"
            cmd = [self.curl, "-sSk", "--http1.1", "--cert", str(self.cert), "--key", str(self.key),
                   "-H", f"Accept: {accept}", "-w", "%{http_code} %{time_total}\n"]
            for name, value in self.HEADERS.items():
                cmd += ["-H", f"{name}: {value}"]
            for _ in range(runs + 2):
                cmd += ["-o", "/dev/null", url]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split("\n")
            answers = [line.split() for line in out if line.strip()]
            if any(code != "200" for code, _ in answers):
                sys.exit(f"direct GET {path}: {[code for code, _ in answers]}")
            return [float(took) for _, took in answers[2:]]
        if self.conn is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            # Each side serves a certificate of its own making; the aggregator is told its CA
            # (curl's -k above for the same reason).
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            ctx.load_cert_chain(str(self.cert), str(self.key))
            self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=300)
        times = []
        for i in range(runs + 2):
            start = time.perf_counter()
            self.conn.request("GET", path, headers={"Accept": accept, **self.HEADERS})
            response = self.conn.getresponse()
            body = response.read()
            if response.status != 200:
                sys.exit(f"direct GET {path}: {response.status} {body[:300]!r}")
            if i >= 2:
                times.append(time.perf_counter() - start)
        return times


def rss_without_api(olm, ns, procs):
    """RSS of `olm run` with the same catalog loaded but no packagemanifests API (a snapshot,
    and so its bundle gauge, exists only once the whole catalog is loaded)."""
    admin = free_port()
    p = subprocess.Popen([olm, "run", "--leader-elect=false", "--packages-address", "off", "--watch-namespace", ns,
                          "--global-catalog-namespace", ns, "--admin-address", f"127.0.0.1:{admin}"],
                         env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(p)
    wait_port(p, admin, 600)
    series = f'olm_catalog_bundles{{namespace="{ns}",name="bench"}}'
    deadline = time.time() + 600
    while metric(admin, series) <= 0:
        if time.time() > deadline:
            sys.exit(f"olm run without the API did not load the catalog in {ns}")
        time.sleep(0.2)
    time.sleep(1)  # the load's buffers handed back (release_free_memory) before reading RSS
    rss = rss_mib(p.pid)
    stop(p, 20)
    return rss


def timed_kubectl_get():
    """Wall time of `kubectl get packagemanifests -A` itself (process start included)."""
    start = time.perf_counter()
    subprocess.run(["kubectl", "get", "packagemanifests", "-A"], env=ENV, capture_output=True, check=True)
    return time.perf_counter() - start


def wait_listed(ctx, base, ns, count, timeout=600):
    """Waits until the namespace lists `count` packagemanifests; a timeout shows why not."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            _, body = timed_get(ctx, base, f"{API}/namespaces/{ns}/packagemanifests")
            n = len(json.loads(body)["items"])
            if n >= count:
                return n
        except Exception:  # noqa: BLE001 - not registered or not loaded yet
            pass
        time.sleep(0.2)
    status = subprocess.run(["kubectl", "get", "catalogsource", "bench", "-n", ns, "-o", "jsonpath={.status.message}"],
                            env=ENV, capture_output=True, text=True).stdout
    sys.exit(f"fewer than {count} packagemanifests in {ns} after {timeout}s; the CatalogSource says: {status}")


def register_upstream(port, kubectl=kubectl):
    """Upstream serves a self-signed certificate: its APIService skips verification.
    `kubectl(*args, stdin=None)` runs kubectl on the cluster meant (default: the shared one)."""
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "upstream-packages", "namespace": "default"},
         "spec": {"type": "ExternalName", "externalName": "localhost", "ports": [{"port": port}]}},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": "v1.packages.operators.coreos.com"},
         "spec": {"group": "packages.operators.coreos.com", "version": "v1", "groupPriorityMinimum": 2000,
                  "versionPriority": 15, "insecureSkipTLSVerify": True,
                  "service": {"name": "upstream-packages", "namespace": "default", "port": port}}}]}))


def unregister_upstream():
    subprocess.run(["kubectl", "delete", "apiservice", "v1.packages.operators.coreos.com", "--ignore-not-found"],
                   env=ENV, capture_output=True)
    subprocess.run(["kubectl", "delete", "service", "upstream-packages", "-n", "default", "--ignore-not-found"],
                   env=ENV, capture_output=True)


def start_side(side, olm, ns, procs, port):
    if side == "ours":
        admin = free_port()
        p = subprocess.Popen([olm, "run", "--leader-elect=false", "--watch-namespace", ns,
                              "--global-catalog-namespace", ns, "--admin-address", f"127.0.0.1:{admin}",
                              "--packages-address", f"127.0.0.1:{port}"],
                             env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        # Out of a cluster it needs the in-cluster files for its authorization (see the script).
        p = subprocess.Popen([str(REPO / "hack/upstream-olm/package-server"), str(port), ns],
                             env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(p)
    wait_port(p, port, 600)
    if side == "upstream":
        register_upstream(port)
    return p


def watch_latency(ctx, base, ns, name):
    """Seconds from patching the CatalogSource's display name to the MODIFIED event."""
    _, body = timed_get(ctx, base, f"{API}/namespaces/{ns}/packagemanifests")
    rv = json.loads(body)["metadata"]["resourceVersion"]
    req = urllib.request.Request(base + f"{API}/namespaces/{ns}/packagemanifests?watch=true&resourceVersion={rv}&timeoutSeconds=120")
    stream = urllib.request.urlopen(req, context=ctx, timeout=130)
    start = time.perf_counter()
    kubectl("patch", "catalogsource", name, "-n", ns, "--type", "merge", "-p",
            json.dumps({"spec": {"displayName": f"changed-{time.time()}"}}))
    line = stream.readline()
    took = time.perf_counter() - start
    stream.close()
    return took if b'"MODIFIED"' in line else float("nan")


def packages_in(olm, catalog_dir):
    """How many packages the FBC directory declares (what a full list shows)."""
    out = subprocess.run([olm, "catalog", "render", str(catalog_dir)], capture_output=True, text=True, check=True).stdout
    return sum(1 for b in split_json_stream(out) if json.loads(b)["schema"] == "olm.package")


def print_table(results, sets):
    """Per catalog, each side's figures and upstream/ours (higher is better for us): first as
    kubectl reaches the servers, then each server alone and what it holds."""
    through = [("list -A ms", "list_ms", "{:.1f}"), ("table -A ms", "table_ms", "{:.1f}"),
               ("kubectl get -A ms", "kubectl_ms", "{:.0f}"), ("get ms", "get_ms", "{:.1f}"),
               ("RSS MiB", "rss_mib", "{:.0f}")]
    alone = [("alone list -A ms", "direct_list_ms", "{:.2f}"), ("alone table -A ms", "direct_table_ms", "{:.2f}"),
             ("alone get ms", "direct_get_ms", "{:.2f}"), ("anon RSS MiB", "anon_mib", "{:.1f}"),
             ("API's RSS MiB", "api_mib", "{:.1f}")]
    for columns, watch in ((through, True), (alone, False)):
        head = f"{'catalog':9} {'pkgs':>5} | " + " | ".join(f"{title:>21} {'x':>6}" for title, _, _ in columns)
        head += f" | {'watch ms':>14}" if watch else ""
        print("\n" + head + "\n" + "-" * len(head))
        for set_name in sets:
            by = {r["side"]: r for r in results if r["set"] == set_name}
            o, u = by.get("ours"), by.get("upstream")
            cells = []
            for _, key, fmt in columns:
                pair = f"{(fmt.format(o[key]) if o else '-'):>9} / {(fmt.format(u[key]) if u else '-'):>9}"
                ratio = f"{u[key] / o[key]:5.1f}x" if o and u and o[key] > 0 else "     -"
                cells.append(f"{pair:>21} {ratio}")
            line = f"{set_name:9} {(o or u)['packages']:5} | " + " | ".join(cells)
            if watch:
                watch_ms = f"{o['watch_ms']:.1f} / n/a" if o else "- / n/a"
                line += f" | {watch_ms:>14}"
            print(line)
    print("(ours / upstream; x = upstream/ours, higher is better for ours; upstream implements no watch;\n"
          " alone: asked directly as the kube-apiserver asks; API's RSS: olm run's RSS with the API less without)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", default="both", choices=["ours", "upstream", "both"])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--sets", default="ours,testdata,large")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--community", type=Path, help="an FBC directory served as the set `community`")
    ap.add_argument("--olm", type=Path, help="the olm binary (default: target/release/olm, else target/debug/olm)")
    ap.add_argument("--serve-olm", type=Path, help="another olm for `catalog render/serve` only (e.g. a release build)")
    args = ap.parse_args()
    olm = args.olm or REPO / "target/release/olm"
    if not olm.exists():
        olm = REPO / "target/debug/olm"
        print("note: target/release/olm missing, measuring the debug build (slower than release)")
    serve_olm = args.serve_olm or olm
    print(f"olm run: {olm}; catalog render/serve: {serve_olm}")
    sides = ["ours", "upstream"] if args.side == "both" else [args.side]
    if "upstream" in sides:
        subprocess.run([REPO / "hack/upstream-olm/build", "package-server"], capture_output=True, check=True)
    work = Path(tempfile.mkdtemp(prefix="olm-bench-packages-"))
    base, ctx = credentials(KUBECONFIG, work)
    procs, results = [], []
    try:
        sets = {}
        if "ours" in args.sets:
            sets["ours"] = (REPO / "catalog", packages_in(serve_olm, REPO / "catalog"))
        if "testdata" in args.sets or "large" in args.sets:
            base_dir = work / "testdata"
            base_dir.mkdir()
            packages = testdata_packages()
            # Rendered as a catalog image's bundles are: each names its bundle image, so
            # ListBundles leaves the manifests on the server (as in every public catalog).
            with open(base_dir / "catalog.json", "wb") as f:
                subprocess.run([serve_olm, "catalog", "render", "--image-template",
                                "quay.io/community-operators/{{.Package}}-bundle:v{{.Version}}", *packages],
                               stdout=f, check=True)
            if "testdata" in args.sets:
                sets["testdata"] = (base_dir, packages_in(serve_olm, base_dir))
            if "large" in args.sets:
                one = replicated_catalog(base_dir / "catalog.json", 1, work / "probe")
                copies = max(1, round(10_000 / max(one, 1)))
                replicated_catalog(base_dir / "catalog.json", copies, work / "large")
                sets["large"] = (work / "large", packages_in(serve_olm, base_dir) * copies)
        if args.community:
            sets["community"] = (args.community, packages_in(serve_olm, args.community))
        for set_name, (catalog_dir, expected) in sets.items():
            ns = f"bench-pkg-{set_name}-{os.getpid()}"
            kubectl("create", "namespace", ns)
            grpc = free_port()
            srv = subprocess.Popen([serve_olm, "catalog", "serve", str(catalog_dir), "--address", "127.0.0.1", "--port", str(grpc)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(srv)
            wait_port(srv, grpc, 600)
            kubectl("apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "bench", "namespace": ns},
                "spec": {"sourceType": "grpc", "address": f"127.0.0.1:{grpc}", "displayName": "Bench"}}))
            for side in sides:
                if side == "upstream":
                    # Upstream connects only to sources whose status names a registry service.
                    kubectl("patch", "catalogsource", "bench", "-n", ns, "--subresource", "status", "--type", "merge",
                            "-p", json.dumps({"status": {"registryService": {"protocol": "grpc", "serviceName": "bench",
                                                                             "serviceNamespace": ns, "port": str(grpc)}}}))
                started = time.perf_counter()
                port = free_port()
                p = start_side(side, olm, ns, procs, port)
                loaded = wait_listed(ctx, base, ns, expected)
                load_s = time.perf_counter() - started
                lists = [timed_get(ctx, base, f"{API}/packagemanifests")[0] for _ in range(args.runs)]
                tables = [timed_get(ctx, base, f"{API}/packagemanifests?limit=500", TABLE_ACCEPT)[0]
                          for _ in range(args.runs)]
                kubectl_gets = [timed_kubectl_get() for _ in range(args.runs)]
                _, body = timed_get(ctx, base, f"{API}/namespaces/{ns}/packagemanifests")
                first = json.loads(body)["items"][0]["metadata"]["name"]
                gets = [timed_get(ctx, base, f"{API}/namespaces/{ns}/packagemanifests/{first}")[0] for _ in range(args.runs)]
                direct = Direct(port)
                direct_lists = direct.timed_gets(f"{API}/packagemanifests", args.runs)
                direct_tables = direct.timed_gets(f"{API}/packagemanifests?limit=500", args.runs, TABLE_ACCEPT)
                direct_gets = direct.timed_gets(f"{API}/namespaces/{ns}/packagemanifests/{first}", args.runs)
                # At rest, after the requests: the watch below rebuilds every manifest.
                rss, anon = rss_mib(p.pid), rss_mib(p.pid, "RssAnon")
                watch = watch_latency(ctx, base, ns, "bench") if side == "ours" else float("nan")
                row = {"set": set_name, "side": side, "packages": loaded,
                       "list_ms": statistics.median(lists) * 1000, "get_ms": statistics.median(gets) * 1000,
                       "table_ms": statistics.median(tables) * 1000, "kubectl_ms": statistics.median(kubectl_gets) * 1000,
                       "direct_list_ms": statistics.median(direct_lists) * 1000,
                       "direct_table_ms": statistics.median(direct_tables) * 1000,
                       "direct_get_ms": statistics.median(direct_gets) * 1000,
                       "rss_mib": rss, "anon_mib": anon,
                       "watch_ms": watch * 1000, "load_s": load_s}
                results.append(row)
                watch_text = "n/a" if side == "upstream" else f"{row['watch_ms']:.1f} ms"
                print(f"{set_name:9} {side:8} {loaded:5} packages  start→listed {load_s:6.1f} s  list -A {row['list_ms']:8.1f} ms  "
                      f"table -A {row['table_ms']:7.1f} ms  kubectl get -A {row['kubectl_ms']:7.1f} ms  "
                      f"get {row['get_ms']:6.1f} ms  RSS {row['rss_mib']:7.1f} MiB  change→watch event {watch_text}", flush=True)
                stop(p, 20)
                # The whole of upstream's process is the API; ours is olm run's RSS with it
                # less without it.
                row["api_mib"] = (row["rss_mib"] - rss_without_api(olm, ns, procs)
                                  if side == "ours" else row["rss_mib"])
                print(f"{'':9} {'':8} alone: list -A {row['direct_list_ms']:8.2f} ms  table -A {row['direct_table_ms']:7.2f} ms  "
                      f"get {row['direct_get_ms']:6.2f} ms  anonymous RSS {row['anon_mib']:7.1f} MiB  "
                      f"API's own RSS {row['api_mib']:7.1f} MiB", flush=True)
                if side == "upstream":
                    # Its APIService skips TLS verification, which the next `olm run` (a CA
                    # bundle) cannot apply over: remove it as ours removes its own on exit.
                    unregister_upstream()
            kubectl("delete", "namespace", ns, "--wait=false")
        print_table(results, sets)
        if args.json:
            print(json.dumps(results))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        unregister_upstream()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    exit_on_error(main)
