#!/usr/bin/env python3
"""Benchmark: OLM at rest holding the public community catalog as one CatalogSource with the
packagemanifests API on, our `olm-operator` beside upstream OLM v0.46.0 (olm, catalog and
package-server), in one run: the catalog server's start, time until every package is listed,
then memory and CPU of each process at rest. The target: our controllers under 40 MiB RSS.
Method: hack/bench/README.md.

Usage: hack/bench/rest.py [--side both|ours|upstream] [--packages N|a,b] [--rest 45]
           [--server-cache on|off] [--rerender] [--repo GIT_DIR] [--json] [--keep-logs]
       (needs `cargo build --release --bin olm --bin olm-registry` (olm renders the catalog and
        prints the CRDs), `cargo build --profile operator --bin olm-operator`, hack/opm/build
        and hack/upstream-olm/build; the control planes are started and removed here. The
        whole catalog takes about 7 GB of disk in the cache: package folders 2.4 GB, FBC 1.4 GB,
        opm's cache 1.8 GB, olm-registry's 1.0 GB; a first run renders for about 2 min, and
        opm builds its cache cold in about 140 s with a 2 GB peak, on 2 cores)
"""
import argparse, hashlib, importlib, json, os, shutil, subprocess, sys, tempfile, time, types
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts imported
sys.path.insert(0, str(Path(__file__).resolve().parent))
import install as ib  # noqa: E402  (install.py's sides: upstream's operators and ours, teardown)
from common import (  # noqa: E402
    REPO, UPSTREAM_VERSION, BenchError, Cluster, cpu_seconds, free_port, interrupt_on_signals, log, opm_path,
    proc_status, server_env, wait_port,
)
ic = importlib.import_module("install-catalog")  # noqa: E402  (rendering the catalog)
import packages as pk  # noqa: E402  (the upstream APIService)
from serve import grpc_first_answer  # noqa: E402

NS = "memcheck"
CATALOG_NAME = "community"
DEFAULT_REPO = Path(os.environ.get("OLM_COMMUNITY_REPO",
                                   "/work/.mirror/redhat-openshift-ecosystem+community-operators-prod/repo"))
MEMORY_FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM")


def memory(pid):
    """The MEMORY_FIELDS of /proc/PID/status, in MiB, and the process's name."""
    status = proc_status(pid)
    return {"comm": Path(f"/proc/{pid}/comm").read_text().strip(),
            **{field: status[field] / 1024 for field in MEMORY_FIELDS if field in status}}


def binary_stamp(path):
    st = Path(path).resolve().stat()
    return {"binary": str(Path(path).resolve()), "size": st.st_size, "mtime": st.st_mtime}


# ---------------------------------------------------------------------------- the catalog


def community_catalog(args, olm, opm):
    """Extracts the package folders chosen from the repo's HEAD and renders them (through
    install-catalog.py), both cached under the commit; returns the catalog's description."""
    repo = Path(args.repo)
    r = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"{repo}: not a git repository (--repo): {r.stderr.strip()}")
    commit = r.stdout.strip()
    r = subprocess.run(["git", "-C", repo, "ls-tree", "-d", "--name-only", "HEAD", "operators/"],
                       capture_output=True, text=True, check=True)
    folders = sorted(line.split("/", 1)[1] for line in r.stdout.splitlines() if "/" in line)
    if not folders:
        raise BenchError(f"{repo} has no operators/<package>/ at {commit}")
    chosen, label = folders, "all"
    if args.packages:
        if args.packages.isdigit():
            chosen = folders[:int(args.packages)]
            label = "all" if len(chosen) == len(folders) else f"first-{len(chosen)}"
        else:
            chosen = sorted({p.strip() for p in args.packages.split(",") if p.strip()})
            unknown = [p for p in chosen if p not in folders]
            if unknown:
                raise BenchError(f"--packages: not in operators/ at {commit[:12]}: {', '.join(unknown)}")
            label = "all" if chosen == folders else "some-" + hashlib.sha1(",".join(chosen).encode()).hexdigest()[:12]
    if not chosen:
        raise BenchError("--packages chose no package")
    root = ic.CACHE / "community-catalog" / commit
    src = root / "src"
    missing = [p for p in chosen if not (src / "operators" / p).is_dir()]
    if missing:
        log(f"extracting {len(missing)} package folders of {repo} at {commit[:12]} into {src}")
        tmp = src / f".extract-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        paths = [f"operators/{p}" for p in missing]
        # git archive may complain about objects outside the paths that a partial mirror lacks
        # (and exit 0): what counts is that every file of the paths arrives.
        with tempfile.TemporaryFile() as errors:
            archive = subprocess.Popen(["git", "-C", repo, "archive", "--format=tar", "HEAD", "--", *paths],
                                       stdout=subprocess.PIPE, stderr=errors)
            untar = subprocess.run(["tar", "-x", "-C", tmp], stdin=archive.stdout, capture_output=True)
            archive.stdout.close()
            errors.seek(0)
            why = errors.read().decode(errors="replace") + untar.stderr.decode(errors="replace")
        files = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD", "--", *paths],
                               capture_output=True, text=True, check=True).stdout.splitlines()
        got = sum(1 for f in (tmp / "operators").rglob("*") if not f.is_dir()) if (tmp / "operators").is_dir() else 0
        if archive.wait() != 0 or untar.returncode != 0 or got != len(files):
            shutil.rmtree(tmp, ignore_errors=True)
            raise BenchError(f"git archive | tar gave {got} of {len(files)} files: {why.strip()[-500:]}")
        (src / "operators").mkdir(exist_ok=True)
        for p in missing:  # each folder whole or not at all
            (tmp / "operators" / p).rename(src / "operators" / p)
        shutil.rmtree(tmp, ignore_errors=True)
    work = root / f"fbc-{label}"
    work.mkdir(parents=True, exist_ok=True)
    state = work / "catalog-plan.json"
    saved = None
    if state.exists() and (work / "catalog").is_dir() and not args.rerender:
        saved = json.loads(state.read_text())
        key = saved.get("key") or {}
        if key.get("packages") == chosen and key.get("template") == ic.IMAGE_TEMPLATE:
            log(f"reusing the FBC rendered from {commit[:12]} in {work} (--rerender renders it again)")
        else:
            saved = None
    if saved is None:
        state.unlink(missing_ok=True)  # install-catalog.py would reuse a render by the same olm
        shutil.rmtree(work / "server-cache", ignore_errors=True)  # the servers' caches of the old one
        ns = types.SimpleNamespace(catalog_repo=str(src), packages=",".join(chosen), jobs=args.jobs)
        saved = ic.prepare_catalog(ns, work, olm, opm)
    plans, refused = saved["plans"], saved["opm_refused"]
    if not plans:
        raise BenchError("no package rendered and validated")
    fbc = work / "catalog"
    return {
        "repo": str(repo), "commit": commit, "folders": len(folders), "chosen": len(chosen),
        "packages": len(plans), "bundles": saved["bundles"], "dropped": saved["dropped"], "opm_refused": refused,
        "fbc": str(fbc), "fbc_bytes": sum(f.stat().st_size for f in fbc.rglob("*") if f.is_file()),
        "upstream_fbc": str(work / ("catalog-opm" if refused else "catalog")), "server_cache": str(work / "server-cache"),
        "names": sorted(plan["package"] for plan in plans.values()),
        "upstream_names": sorted(plan["package"] for p, plan in plans.items() if p not in refused),
    }


# ---------------------------------------------------------------------------- sides


class RestSide:
    """Mixed in before install.Upstream / install.Ours (their prepare(), CRDs, operators and
    teardown), with this run() instead of the install."""

    server_name = ""  # the catalog server, as its log and cache are named
    server_timeout = 1800  # the package-server's start (the catalog server is waited for apart)

    def __init__(self, args, workdir):
        super().__init__(args, workdir)
        self.cluster = Cluster(f"rest-{self.name}", side=self.name)
        self.catalog_info = None
        self.prepared = False

    def prepare(self):
        if not self.prepared:
            super().prepare()
            self.prepare_binaries()
            self.prepared = True

    def run(self):
        info, k = self.catalog_info, self.cluster.kubectl
        result = {"side": self.name, "label": self.label, "notes": self.notes}
        self.cluster.up()
        k("create", "namespace", NS)
        self.install_crds()
        result["server"] = self.serve_catalog()
        log(f"{self.name}: {self.server_name} answers on {self.address} "
            f"{result['server']['start_seconds']:.1f} s after its start ({result['server']['cache']})")
        k("create", "-f", "-", stdin=json.dumps(
            {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
             "metadata": {"name": CATALOG_NAME, "namespace": NS},
             "spec": {"sourceType": "grpc", "address": self.address, "displayName": "Community Operators",
                      "publisher": "bench"}}))
        expected = set(info["upstream_names" if self.name == "upstream" else "names"])
        started = time.time()
        self.start_controllers()
        log(f"{self.name}: controllers started; waiting for `kubectl get packagemanifests -A` "
            f"to list {len(expected)} packages")
        result["listed_seconds"], result["listed"] = self.wait_listed(expected, started)
        log(f"{self.name}: all {len(expected)} packages listed {result['listed_seconds']:.1f} s after "
            f"the controllers started; {self.args.rest:g} s at rest")
        rest_end = time.time() + self.args.rest
        while time.time() < rest_end:
            self.check_alive()
            time.sleep(min(1.0, max(0.0, rest_end - time.time())))
        self.check_alive()
        result["controllers"] = {name: {**memory(pid), "cpu_seconds": cpu_seconds(pid)}
                                 for name, pid in self.olm_pids.items()}
        result["catalog_server"] = {**memory(self.server_pid), "cpu_seconds": cpu_seconds(self.server_pid)}
        result["loadavg"] = os.getloadavg()
        for name, mem in result["controllers"].items():
            if mem["comm"] not in (name, name[:15]):
                raise BenchError(f"{self.name}: the process measured as {name} is {mem['comm']}")
        for field in MEMORY_FIELDS:
            result.setdefault("controllers_total", {})[field] = sum(m[field] for m in result["controllers"].values())
        result["controllers_total"]["cpu_seconds"] = sum(m["cpu_seconds"] for m in result["controllers"].values())
        cs = self.cluster.kubectl("get", "catalogsource", CATALOG_NAME, "-n", NS, "-o",
                                  "jsonpath={.status.connectionState.lastObservedState}", check=False)
        result["catalogsource_state"] = cs.strip()
        return result

    def serve_catalog(self):
        """Starts the catalog server (its cache built first when missing) and waits for its
        first answer."""
        cache = Path(self.catalog_info["server_cache"]) / self.server_name if self.args.server_cache == "on" else None
        out = {"cache": "no cache (--server-cache off)" if cache is None else "cache warm"}
        for attempt in (1, 2):
            if cache is not None:
                marker = cache.with_name(cache.name + ".built.json")
                stamp = binary_stamp(self.server_bin)
                if not marker.exists() or json.loads(marker.read_text()) != stamp:
                    marker.unlink(missing_ok=True)
                    out["cache"] = "cache built here (cold)"
                    out["cold"] = self.build_cache(cache)
                    marker.write_text(json.dumps(stamp))
            port = free_port()
            argv = self.server_argv(port) + (["--cache-dir", cache] if cache is not None else [])
            started = time.time()
            proc = self.procs.spawn(self.server_name, argv, env=server_env())
            try:
                while not answers(port):
                    self.procs.check(proc)
                    if time.time() - started > self.args.timeout:
                        raise BenchError(f"{self.server_name} does not answer after {self.args.timeout:g} s")
                    time.sleep(0.05)
            except BenchError:
                if attempt == 2 or cache is None or "cold" in out:
                    raise
                # A cache that its server refuses (opm checks the catalog's digest): built again.
                log(f"{self.name}: {self.server_name} refused its cache; building it again")
                self.procs.procs.remove(proc)
                shutil.copy(self.workdir / f"{self.server_name}.log", self.workdir / f"{self.server_name}-refused.log")
                (cache.with_name(cache.name + ".built.json")).unlink(missing_ok=True)
                continue
            out["start_seconds"] = time.time() - started
            self.server_pid, self.address = proc.pid, f"127.0.0.1:{port}"
            return out
        raise AssertionError("unreachable")

    def build_cache(self, cache):
        """The server's --cache-only run: seconds and peak RSS (its rusage)."""
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        log(f"{self.name}: building {self.server_name}'s index cache of the catalog (--cache-only; cold)")
        started = time.time()
        proc = self.procs.spawn(f"{self.server_name}-cache-only",
                                self.server_argv(free_port()) + ["--cache-dir", cache, "--cache-only"],
                                env=server_env())
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.procs.procs.remove(proc)  # ended, as it should: not one to check or stop
        seconds = time.time() - started
        if proc.returncode != 0:
            raise BenchError(f"{self.server_name} --cache-only exited with {proc.returncode}:\n"
                             + self.procs.tail(proc.bench_name))
        log(f"{self.name}: cache built in {seconds:.1f} s, peak RSS {usage.ru_maxrss / 1024:.0f} MiB")
        return {"seconds": seconds, "peak_mib": usage.ru_maxrss / 1024}

    def wait_listed(self, expected, started):
        """Polls `kubectl get packagemanifests -A` until it lists every expected package;
        returns (seconds after `started`, packages listed)."""
        deadline, last_log, names = started + self.args.timeout, 0.0, set()
        while True:
            out = subprocess.run(["kubectl", "--kubeconfig", str(self.cluster.kubeconfig), "get", "packagemanifests",
                                  "-A", "--no-headers"], capture_output=True, text=True)
            now = time.time()
            if out.returncode == 0:
                names = {cols[1] for cols in (line.split() for line in out.stdout.splitlines()) if len(cols) > 1}
                if expected <= names:
                    return now - started, len(names)
            self.check_alive()
            if now > deadline:
                state = self.cluster.kubectl("get", "catalogsource", CATALOG_NAME, "-n", NS, "-o",
                                             "jsonpath={.status.connectionState}", check=False)
                missing = sorted(expected - names)
                raise BenchError(f"{self.name}: {len(names)} of {len(expected)} packages listed after "
                                 f"{self.args.timeout:g} s (missing e.g. {', '.join(missing[:5])}); "
                                 f"CatalogSource state {state}; last kubectl error: {out.stderr.strip()[-300:]}")
            if now - last_log > 30:
                log(f"{self.name}:   {len(names & expected)}/{len(expected)} listed after {now - started:.0f} s")
                last_log = now
            time.sleep(2)


def answers(port):
    try:
        return grpc_first_answer(port)
    except (OSError, RuntimeError):
        return False


class OursRest(RestSide, ib.Ours):
    server_name = "olm-registry"

    def prepare_binaries(self):
        self.operator = Path(self.args.operator).resolve()
        self.server_bin = Path(self.args.registry).resolve()
        if not os.access(self.operator, os.X_OK):
            raise BenchError(f"no {self.operator}: run cargo build --profile operator --bin olm-operator")
        if not os.access(self.server_bin, os.X_OK):
            raise BenchError(f"no {self.server_bin}: run cargo build --release --bin olm-registry")

    def server_argv(self, port):
        return [self.server_bin, self.catalog_info["fbc"], "--address", "127.0.0.1", "--port", port]

    def start_controllers(self):
        env = dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig))
        operator = self.procs.spawn("olm-operator", [
            self.operator, "--leader-elect=false", "--watch-namespace", NS, "--global-catalog-namespace", NS,
            "--packages-address", f"127.0.0.1:{free_port()}", "--admin-address", f"127.0.0.1:{free_port()}"],
            env=env, cwd=self.workdir)
        self.olm_pids = {"olm-operator": operator.pid}


class UpstreamRest(RestSide, ib.Upstream):
    server_name = "opm-serve"

    def prepare_binaries(self):
        self.server_bin = Path(self.opm)
        if not os.access(self.bin / "package-server", os.X_OK):
            raise BenchError(f"no {self.bin / 'package-server'}: run hack/upstream-olm/build")

    def server_argv(self, port):
        return [self.opm, "serve", self.catalog_info["upstream_fbc"], "--port", port, "--pprof-addr", "",
                "-t", "/dev/null"]

    def start_controllers(self):
        # The package-server first: its script's kubectl calls overlap the operators' start.
        port = free_port()
        server = self.procs.spawn("package-server", [REPO / "hack/upstream-olm/package-server", port, NS],
                                  env=dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig)), cwd=self.workdir)
        self.start_operators(NS)
        wait_port(server, port, self.server_timeout)
        pk.register_upstream(port, kubectl=self.cluster.kubectl)
        self.olm_pids["package-server"] = server.pid


# ---------------------------------------------------------------------------- report


def mib(value):
    return "—" if value is None else f"{value:.1f} MiB"


def secs(value):
    return "—" if value is None else f"{value:.1f} s"


def size(n):
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def report(results):
    cat, res = results["catalog"], results["sides"]
    sides = [s for s in ("upstream", "ours") if s in res]
    both = len(sides) == 2
    ours = res.get("ours")
    print()
    print("OLM at rest holding the public community catalog as one CatalogSource, packagemanifests on")
    print(f"  catalog: community-operators-prod at {cat['commit'][:12]}: {cat['packages']} of {cat['chosen']} "
          f"package folders render and validate ({cat['bundles']:,} bundles, {size(cat['fbc_bytes'])} of FBC)"
          + (f"; upstream's without {len(cat['opm_refused'])} opm refuses" if cat["opm_refused"] else ""))
    print(f"  RSS: VmRSS of /proc/PID/status, {results['rest']:g} s after `kubectl get packagemanifests -A` "
          f"listed every package")

    rows = [("controllers RSS" + (" (olm + catalog + package-server | olm-operator)" if both else ""),
             lambda s: s["controllers_total"]["VmRSS"], mib, True)]
    for name in ("olm", "catalog", "package-server", "olm-operator"):
        if any(name in res[s]["controllers"] for s in sides):
            rows.append((f"  {name}", lambda s, n=name: (s["controllers"].get(n) or {}).get("VmRSS"), mib, False))
    rows += [
        ("  anonymous (RssAnon)", lambda s: s["controllers_total"]["RssAnon"], mib, True),
        ("  file-backed (RssFile)", lambda s: s["controllers_total"]["RssFile"], mib, True),
        ("  peak (sum of VmHWM)", lambda s: s["controllers_total"]["VmHWM"], mib, True),
        ("controllers CPU time, start → at rest", lambda s: s["controllers_total"]["cpu_seconds"], secs, True),
        ("controllers start → all packagemanifests listed", lambda s: s["listed_seconds"], secs, True),
        ("catalog server RSS (opm serve | olm-registry)", lambda s: s["catalog_server"]["VmRSS"], mib, True),
        ("  anonymous (RssAnon)", lambda s: s["catalog_server"]["RssAnon"], mib, True),
        ("  file-backed (RssFile)", lambda s: s["catalog_server"]["RssFile"], mib, True),
        ("catalog server start → serving" + (" (from its cache)" if results["server_cache"] == "on" else ""),
         lambda s: s["server"]["start_seconds"], secs, True),
    ]
    if any("cold" in res[s]["server"] for s in sides):  # built in this run: the cold figures
        rows += [("catalog cache build (cold), time", lambda s: (s["server"].get("cold") or {}).get("seconds"), secs, True),
                 ("catalog cache build (cold), peak RSS",
                  lambda s: (s["server"].get("cold") or {}).get("peak_mib"), mib, True)]
    header = ["", *(f"upstream {UPSTREAM_VERSION}" if s == "upstream" else "olm-rs" for s in sides)]
    if both:
        header.append("upstream/ours")
    table = [header]
    for label, get, fmt, ratio in rows:
        values = [get(res[s]) for s in sides]
        row = [label, *(fmt(v) for v in values)]
        if both:
            row.append(f"{values[0] / values[1]:.1f}x" if ratio and None not in values and values[1] else "")
        table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    for s in sides:
        side = res[s]
        print(f"\n{side['label']}: catalog server {side['server']['cache']}; {side['listed']} packagemanifests "
              f"listed; CatalogSource {side['catalogsource_state'] or '?'}; load average {side['loadavg'][0]:.2f}")
        for name, m in [*side["controllers"].items(), ("catalog server", side["catalog_server"])]:
            print(f"  {name:15} VmRSS {m['VmRSS']:7.1f}  RssAnon {m['RssAnon']:7.1f}  RssFile {m['RssFile']:6.1f}  "
                  f"RssShmem {m['RssShmem']:4.1f}  VmHWM {m['VmHWM']:7.1f} MiB  CPU {m['cpu_seconds']:6.1f} s ({m['comm']})")
        for note in side["notes"]:
            print(f"  note: {note}")
    if ours is not None:
        rss = ours["controllers_total"]["VmRSS"]
        print(f"\nTarget: our controllers under 40 MiB RSS at rest: {'met' if rss < 40 else 'NOT met'} ({rss:.1f} MiB)")
    if cat["dropped"]:
        print(f"\nLeft out of the catalog ({len(cat['dropped'])} packages that do not render or validate): "
              + ", ".join(sorted(cat["dropped"])))
    if cat["opm_refused"]:
        print(f"Left out of upstream's catalog ({len(cat['opm_refused'])} packages opm validate refuses): "
              + ", ".join(sorted(cat["opm_refused"])))


# ---------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--side", choices=["both", "upstream", "ours"], default="both")
    ap.add_argument("--packages", help="the first N package folders by name, or a comma-separated list (default all)")
    ap.add_argument("--rest", type=float, default=45, help="seconds at rest after all are listed (default 45)")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds a catalog server may take to answer, and the listing to be complete (default 1800)")
    ap.add_argument("--server-cache", choices=["on", "off"], default="on",
                    help="serve the catalog from the servers' index caches (default on; built when missing)")
    ap.add_argument("--repo", default=str(DEFAULT_REPO),
                    help=f"git directory of community-operators-prod (default $OLM_COMMUNITY_REPO or {DEFAULT_REPO})")
    ap.add_argument("--rerender", action="store_true", help="render the catalog again, even if cached")
    ap.add_argument("--jobs", type=int, default=2, help="packages rendered at once (default 2)")
    ap.add_argument("--olm", default=str(REPO / "target/release/olm"),
                    help="olm, to render the catalog and print the CRDs (default target/release/olm)")
    ap.add_argument("--registry", default=str(REPO / "target/release/olm-registry"),
                    help="our catalog server (default target/release/olm-registry)")
    ap.add_argument("--operator", default=str(REPO / "target/operator/olm-operator"),
                    help="our controllers (default target/operator/olm-operator)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    ap.add_argument("--keep-logs", action="store_true", help="keep the processes' logs (their directory is printed)")
    args = ap.parse_args()
    if args.packages and args.packages.isdigit() and int(args.packages) < 1:
        ap.error("--packages must be at least 1")

    interrupt_on_signals()

    workdir = Path(tempfile.mkdtemp(prefix="olm-bench-rest-"))
    kinds = {"upstream": UpstreamRest, "ours": OursRest}
    names = ["ours", "upstream"] if args.side == "both" else [args.side]
    results = {"catalog": None, "rest": args.rest, "server_cache": args.server_cache, "sides": {}}

    def make_sides():
        sides = [kinds[n](args, workdir) for n in names]
        for side in sides:  # every prerequisite before minutes of rendering
            side.prepare()
        olm = Path(args.olm).resolve()
        if not os.access(olm, os.X_OK):
            raise BenchError(f"no {olm}: run cargo build --release --bin olm")
        info = community_catalog(args, olm, opm_path())
        results["catalog"] = {k: v for k, v in info.items() if not k.endswith("names")}
        for side in sides:
            side.catalog_info = info
        return sides

    sides, failure = ib.run_sides(make_sides, lambda side: side.run(), workdir, args.keep_logs)
    results["sides"] = sides
    if sides:
        if args.json:
            print(json.dumps(results, indent=2, default=str))
        else:
            report(results)
    if failure:
        print(f"\nerror: {failure}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
