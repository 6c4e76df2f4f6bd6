#!/usr/bin/env python3
"""Benchmark: `olm run` holding catalog snapshots. Serves the community-operators testdata
(rendered to FBC, without kuadrant-operator, which opm refuses; optionally replicated) with
`olm catalog serve` and `opm serve`, points one CatalogSource at each, and prints for `olm run`:
the time from creating the CatalogSource to its snapshot being in use, RSS before and after,
and the status writes and content loads over a steady-state minute fraction.

Usage: hack/bench/run.py [--copies 1,4] [--steady 10]
       (needs the control plane from hack/cluster/up, target/release/olm, hack/opm/build)
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalog import REPO, TESTDATA, replicated_catalog  # noqa: E402
from serve import free_port  # noqa: E402

KUBECONFIG = str(REPO / "target/cluster/kubeconfig")
ENV = dict(os.environ, KUBECONFIG=KUBECONFIG)


def kubectl(*args, stdin=None):
    return subprocess.run(["kubectl", *args], input=stdin, env=ENV, capture_output=True, text=True, check=True).stdout


def rss_mib(pid, field="VmRSS"):
    """A process's resident memory (or another /proc status field, e.g. RssAnon) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read().decode()


def metric(port, series):
    for line in get(port, "/metrics").splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_port(port, proc, timeout=120):
    import socket
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", default="1,4")
    ap.add_argument("--steady", type=float, default=10.0, help="seconds of steady state to watch")
    args = ap.parse_args()
    olm = REPO / "target/release/olm"
    if not olm.exists():
        sys.exit("build it first: cargo build --release --bin olm")
    opm = subprocess.run([REPO / "hack/opm/path"], capture_output=True, text=True, check=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="olm-bench-run-"))
    procs = []
    ns = f"bench-run-{os.getpid()}"
    try:
        base = work / "base"
        base.mkdir()
        packages = [str(p) for p in sorted(TESTDATA.iterdir()) if p.is_dir() and p.name != "kuadrant-operator"]
        with open(base / "catalog.json", "wb") as f:
            subprocess.run([olm, "catalog", "render", *packages], stdout=f, check=True)
        kubectl("create", "namespace", ns)
        admin = free_port()
        run = subprocess.Popen([olm, "run", "--leader-elect=false", "--packages-address", "off", "--watch-namespace", ns,
                                "--admin-address", f"127.0.0.1:{admin}", "--catalog-check-interval", "2s"],
                               env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(run)
        wait_port(admin, run)
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
                env = {k: v for k, v in os.environ.items() if k != "OLM_CACHE_DIR"}
                srv = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                procs.append(srv)
                wait_port(port, srv)
                time.sleep(0.5 if server == "olm" else 3)  # opm opens the port before it answers
                name = f"x{copies}-{server}"
                start = time.time()
                kubectl("apply", "-f", "-", stdin=json.dumps({
                    "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"sourceType": "grpc", "address": f"127.0.0.1:{port}"}}))
                while True:
                    snaps = json.loads(get(admin, "/debug/catalogs"))
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
    main()
