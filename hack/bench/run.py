#!/usr/bin/env python3
"""Benchmark: `olm run` holding catalog snapshots of the community-operators testdata (served by
`olm catalog serve` and `opm serve`): time to a snapshot in use, RSS, and steady-state writes.
Method: hack/bench/README.md.

Usage: hack/bench/run.py [--copies 1,4] [--steady 10]
       (needs the control plane from hack/cluster/up, target/release/olm, hack/opm/build)
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    ENV, REPO, admin_get, exit_on_error, free_port, kubectl, metric, opm_path, render_testdata, replicated_catalog,
    rss_mib, server_env, wait_port,
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", default="1,4")
    ap.add_argument("--steady", type=float, default=10.0, help="seconds of steady state to watch")
    args = ap.parse_args()
    olm = REPO / "target/release/olm"
    if not olm.exists():
        sys.exit("build it first: cargo build --release --bin olm")
    opm = opm_path()
    work = Path(tempfile.mkdtemp(prefix="olm-bench-run-"))
    procs = []
    ns = f"bench-run-{os.getpid()}"
    try:
        base = work / "base"
        render_testdata(olm, base)
        kubectl("create", "namespace", ns)
        admin = free_port()
        run = subprocess.Popen([olm, "run", "--leader-elect=false", "--packages-address", "off", "--watch-namespace", ns,
                                "--admin-address", f"127.0.0.1:{admin}", "--catalog-check-interval", "2s"],
                               env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(run)
        wait_port(run, admin)
        time.sleep(1)
        print(f"olm run idle: RSS {rss_mib(run.pid):.1f} MiB")
        rows = []
        for copies in (int(c) for c in args.copies.split(",")):
            cat = work / f"x{copies}"
            bundles = replicated_catalog(base / "catalog.json", copies, cat)
            for server in ("olm", "opm"):
                port = free_port()
                cmd = ([olm, "catalog", "serve", str(cat), "--address", "127.0.0.1", "--port", str(port)] if server == "olm"
                       else [opm, "serve", str(cat), "--port", str(port), "--pprof-addr", "", "-t", "/dev/null"])
                srv = subprocess.Popen(cmd, env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                procs.append(srv)
                wait_port(srv, port)
                time.sleep(0.5 if server == "olm" else 3)  # opm opens the port before it answers
                name = f"x{copies}-{server}"
                start = time.time()
                kubectl("apply", "-f", "-", stdin=json.dumps({
                    "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"sourceType": "grpc", "address": f"127.0.0.1:{port}"}}))
                while True:
                    snaps = json.loads(admin_get(admin, "/debug/catalogs"))
                    if any(s["name"] == name for s in snaps):
                        break
                    if time.time() - start > 300:
                        sys.exit(f"{name}: no snapshot after 300 s")
                    time.sleep(0.05)
                loaded = time.time() - start
                rows.append((name, bundles, loaded, rss_mib(run.pid)))
                print(f"{name}: {bundles} bundles in use after {loaded:.2f} s; olm run RSS {rss_mib(run.pid):.1f} MiB")
        time.sleep(3)  # the last round's status write lands after its snapshot
        writes = metric(admin, 'olm_status_writes_total{controller="catalogsource"}')
        rounds = metric(admin, 'olm_reconciles_total{controller="catalogsource"}')
        time.sleep(args.steady)
        writes2 = metric(admin, 'olm_status_writes_total{controller="catalogsource"}')
        rounds2 = metric(admin, 'olm_reconciles_total{controller="catalogsource"}')
        print(f"steady state, {args.steady:.0f} s: {rounds2 - rounds:.0f} rounds, {writes2 - writes:.0f} status writes; "
              f"olm run RSS {rss_mib(run.pid):.1f} MiB holding {len(rows)} snapshots")
    finally:
        for p in procs:
            p.kill()
        subprocess.run(["kubectl", "delete", "namespace", ns, "--wait=false"], env=ENV, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    exit_on_error(main)
