#!/usr/bin/env python3
"""Benchmark: many installs at once, `olm run` side by side with upstream OLM v0.46.0.

N namespaces × 1 Subscription, and one namespace × M Subscriptions to renamed copies of
reverse-words, each side on its own audited control plane: time to the last CSV Succeeded,
OLM's requests and writes per install, peak RSS. Method: hack/bench/README.md.

Usage: hack/bench/bulk.py [--side both|ours|upstream] [--namespaces 1,10,100] [--per-namespace 20]
           [--timeout 600] [--nodes 3] [--json] [--keep-logs]
       (needs hack/upstream-olm/build, hack/opm/build and `cargo build --release --bin olm`)
"""
import argparse, base64, datetime, json, shutil, sys, tempfile, threading, time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import install as ib  # noqa: E402  (install.py's sides, audit counting and CSV watch)
import yaml  # noqa: E402
from common import REPO, Api, BenchError, interrupt_on_signals, log, rss_mib  # noqa: E402

SOURCE = "bench"


def renamed_copies(src_catalog, dest, copies):
    """dest: src_catalog's packages plus `copies` renamed copies of reverse-words."""
    shutil.copytree(src_catalog, dest)
    docs = list(yaml.safe_load_all((src_catalog / ib.PACKAGE / "catalog.yaml").read_text()))
    with open(dest / "copies.json", "w") as f:
        for k in range(copies):
            def rename(text, k=k):
                return text.replace("reverse-words", f"rw{k}").replace("linuxera.org", f"rw{k}.linuxera.org")
            for doc in docs:
                doc = json.loads(rename(json.dumps(doc)))
                for p in doc.get("properties", []):
                    if p["type"] == "olm.bundle.object":
                        text = base64.b64decode(p["value"]["data"]).decode()
                        p["value"]["data"] = base64.b64encode(rename(text).encode()).decode()
                f.write(json.dumps(doc) + "\n")
    return [f"rw{k}" for k in range(copies)]


class Watch(ib.CsvWatch):
    """All CSVs of the cluster: when each (namespace, CSV) was first seen Succeeded (copies
    excluded)."""

    timeout_seconds = 7200

    def __init__(self, api):
        super().__init__(api, None)
        self.succeeded_at = {}  # (namespace, name) -> wall time
        self.last = {}  # (namespace, name) -> last phase, reason
        self.changed = threading.Condition()

    def run(self):
        super().run()
        with self.changed:
            self.changed.notify_all()

    def saw(self, csv):
        status = csv.get("status") or {}
        if status.get("reason") == "Copied":
            return
        key = (csv["metadata"]["namespace"], csv["metadata"]["name"])
        with self.changed:
            self.last[key] = (status.get("phase"), status.get("reason"))
            if status.get("phase") == "Succeeded":
                self.succeeded_at.setdefault(key, time.time())
            self.changed.notify_all()


class PeakRss(threading.Thread):
    """The peak of the summed VmRSS of some processes, sampled until stopped."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids, self.peak, self.stop = pids, 0.0, threading.Event()

    def run(self):
        while not self.stop.wait(0.2):
            self.peak = max(self.peak, sum(rss_mib(p) or 0 for p in self.pids))


def csv_name(package):
    return f"{package}.v0.5.0"


def plans_installed_at(api, namespaces):
    """When the last InstallPlan in `namespaces` turned Installed (its condition's
    lastTransitionTime); None while one is not Installed yet."""
    listing = api.get("/apis/operators.coreos.com/v1alpha1/installplans") or {}
    times = []
    for plan in listing.get("items", []):
        if plan["metadata"]["namespace"] not in namespaces:
            continue
        installed = [c for c in (plan.get("status") or {}).get("conditions", [])
                     if c.get("type") == "Installed" and c.get("status") == "True" and c.get("lastTransitionTime")]
        if not installed:
            return None
        times.append(datetime.datetime.fromisoformat(
            installed[0]["lastTransitionTime"].replace("Z", "+00:00")).timestamp())
    return max(times) if times else None


class Bulk:
    def __init__(self, side, args, packages):
        self.side, self.args, self.packages = side, args, packages
        self.watch = None

    def run(self):
        s = self.side
        s.cluster.up(nodes=self.args.nodes)
        s.api = Api(s.cluster.kubeconfig, s.workdir)
        s.audit = ib.Audit(s.cluster.audit_log)
        s.cluster.kubectl("create", "namespace", ib.GLOBAL_NS)
        s.start()
        s.cluster.kubectl("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": SOURCE, "namespace": ib.GLOBAL_NS},
            "spec": {"sourceType": "grpc", "address": s.address, "displayName": "bench"}}))
        s.api.poll(f"{s.name}: CatalogSource {ib.GLOBAL_NS}/{SOURCE} READY", 120, lambda: (
            ((s.api.get(f"/apis/operators.coreos.com/v1alpha1/namespaces/{ib.GLOBAL_NS}/catalogsources/{SOURCE}") or {})
             .get("status") or {}).get("connectionState", {}).get("lastObservedState") == "READY"))
        self.watch = Watch(s.api)
        self.watch.start()
        if not self.watch.ready.wait(30) or self.watch.error:
            raise BenchError(f"watch on CSVs failed: {self.watch.error}")
        rounds = []
        try:
            for n in self.args.namespaces:
                names = [f"bulk{n}-{i}" for i in range(n)]
                rounds.append(self.round(f"{n} namespaces × 1", names, [(ns, ib.PACKAGE) for ns in names]))
            for m in self.args.per_namespace:
                ns = f"many{m}"
                rounds.append(self.round(f"1 namespace × {m}", [ns], [(ns, p) for p in self.packages[:m]]))
        finally:
            self.watch.close()
            shutil.copy(s.cluster.audit_log, s.workdir / "audit.log")  # kept with --keep-logs
        return {"side": s.name, "rounds": rounds, "notes": s.notes}

    def round(self, label, namespaces, subs):
        s = self.side
        items = []
        for ns in namespaces:
            items.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            items.append({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                          "metadata": {"name": "bench", "namespace": ns}, "spec": {"targetNamespaces": [ns]}})
        s.cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        wanted = set(namespaces)

        def groups_ready():
            listing = s.api.get("/apis/operators.coreos.com/v1/operatorgroups") or {}
            ready = {g["metadata"]["namespace"] for g in listing.get("items", [])
                     if (g.get("status") or {}).get("namespaces")}
            return wanted <= ready
        s.api.poll(f"{s.name}: {len(wanted)} OperatorGroups with status.namespaces", 300, groups_ready, 0.5)
        s.wait_quiet(label, timeout=120)
        sampler = PeakRss(list(s.olm_pids.values()))
        sampler.start()
        created = json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
             "metadata": {"name": package, "namespace": ns},
             "spec": {"name": package, "channel": ib.CHANNEL, "source": SOURCE, "sourceNamespace": ib.GLOBAL_NS,
                      "installPlanApproval": "Automatic"}} for ns, package in subs]})
        launched = time.time()
        s.cluster.kubectl("create", "-f", "-", stdin=created)
        expected = {(ns, csv_name(package)) for ns, package in subs}
        deadline = launched + self.args.timeout
        with self.watch.changed:
            while not expected <= self.watch.succeeded_at.keys():
                if self.watch.error:
                    raise BenchError(f"watch on CSVs failed: {self.watch.error}")
                if time.time() > deadline:
                    break
                self.watch.changed.wait(1.0)
                s.check_alive()
            done = {k: self.watch.succeeded_at[k] for k in expected if k in self.watch.succeeded_at}
            phases = {k: self.watch.last.get(k) for k in expected - done.keys()}
        # The plans too: a plan may finish its last steps after its CSV has Succeeded (it
        # still shows Installing), so the round reports when the last one turned Installed,
        # as its condition says (whole seconds).
        try:
            plans_done = s.api.poll(f"{s.name}: every InstallPlan of {label} Complete",
                                    max(deadline - time.time(), 1),
                                    lambda: plans_installed_at(s.api, wanted), 1.0)
        except BenchError:
            plans_done = None
        sampler.stop.set()
        sampler.join()
        if not done:
            raise BenchError(f"{s.label}, {label}: no install reached Succeeded in {self.args.timeout:g} s")
        last = max(done.values())
        s.audit.catch_up(last, s.poke)
        creates = [r[0] for r in s.audit.requests.values()
                   if r[1] == "create" and r[3] == "subscriptions" and r[4] in wanted and r[2].startswith("kubectl")]
        if not creates:
            raise BenchError(f"{label}: the Subscription creates are not in the audit log")
        start = min(creates)
        window = ib.summarize(s.audit.window(start, last))
        result = {"round": label, "installs": len(expected), "succeeded": len(done), "seconds": last - start,
                  "first_succeeded": min(done.values()) - start,
                  "plans_complete": plans_done - start if plans_done else None, "requests": window["requests"],
                  "writes": window["writes"], "by_agent_verb": window["by_agent_verb"], "peak_rss_mib": sampler.peak,
                  "not_succeeded": {f"{ns}/{n}": p for (ns, n), p in sorted(phases.items())}}
        log(f"{s.name} {label}: {len(done)}/{len(expected)} Succeeded, last {result['seconds']:.2f} s after the first "
               f"create; {window['requests']} requests, {window['writes']} writes; peak RSS {sampler.peak:.0f} MiB; "
               + (f"every InstallPlan Complete {result['plans_complete']:.2f} s after the first create"
                  if plans_done else "not every InstallPlan Complete in time"))
        return result


def report(results):
    sides = [n for n in ("ours", "upstream") if n in results]
    print("\nround                 | side     | Succeeded | seconds | req   | writes | req/install | writes/install | peak RSS MiB")
    print("-" * 118)
    labels = [r["round"] for r in results[sides[0]]["rounds"]]
    for i, label in enumerate(labels):
        for name in sides:
            r = results[name]["rounds"][i]
            n = r["installs"]
            print(f"{label:21} | {name:8} | {r['succeeded']:4}/{n:<4} | {r['seconds']:7.2f} | {r['requests']:5} | "
                  f"{r['writes']:6} | {r['requests'] / n:11.1f} | {r['writes'] / n:14.1f} | {r['peak_rss_mib']:12.0f}")
        if len(sides) == 2:
            o, u = results["ours"]["rounds"][i], results["upstream"]["rounds"][i]
            print(f"{'':21} | upstream/ours: time {u['seconds'] / o['seconds']:.1f}x, requests "
                  f"{u['requests'] / max(o['requests'], 1):.1f}x, writes {u['writes'] / max(o['writes'], 1):.1f}x, "
                  f"peak RSS {u['peak_rss_mib'] / max(o['peak_rss_mib'], 1):.1f}x")
    for name in sides:
        for r in results[name]["rounds"]:
            complete = r.get("plans_complete")
            print(f"{name} {r['round']}: every InstallPlan Complete "
                  + (f"{complete:.0f} s after the first create (whole seconds)" if complete is not None
                     else "not in time"))
            if r["not_succeeded"]:
                print(f"{name} {r['round']}: not Succeeded: {r['not_succeeded']}")
        for note in results[name]["notes"]:
            print(f"{name}: note: {note}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--side", choices=["both", "upstream", "ours"], default="both")
    ap.add_argument("--namespaces", default="1,10,100", help="rounds of N namespaces × 1 Subscription")
    ap.add_argument("--per-namespace", default="20", help="rounds of 1 namespace × M Subscriptions ('' for none)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a round may take (default 600)")
    ap.add_argument("--nodes", type=int, default=3, help="kwok nodes (default 3)")
    ap.add_argument("--olm", default=str(REPO / "target/release/olm"), help="our binary (default target/release/olm)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args()
    args.namespaces = [int(n) for n in args.namespaces.split(",") if n]
    args.per_namespace = [int(m) for m in args.per_namespace.split(",") if m]

    interrupt_on_signals()
    workdir = Path(tempfile.mkdtemp(prefix="olm-bench-bulk-"))
    catalog = workdir / "catalog"
    packages = renamed_copies(REPO / "catalog", catalog, max(args.per_namespace, default=0))
    kinds = {"upstream": ib.Upstream, "ours": ib.Ours}
    names = ["ours", "upstream"] if args.side == "both" else [args.side]

    def make_sides():
        sides = [kinds[n](args, workdir) for n in names]
        for side in sides:
            side.catalog = catalog
        return sides
    results, failure = ib.run_sides(make_sides, lambda side: Bulk(side, args, packages).run(), workdir,
                                    args.keep_logs)
    if results and args.json:
        print(json.dumps(results, indent=2))
    elif results:
        report(results)
    if failure:
        print(f"\nerror: {failure}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
