#!/usr/bin/env python3
"""Benchmark: catalog images with no container engine (so no upstream peer): build + push of our
catalog and of the testdata as one catalog image, then pull + load of it in `olm run`, with
times and RSS. Method: hack/bench/README.md.

Usage: hack/bench/images.py   (needs target/release/olm or OLM_BIN=..., GNU time, hack/cluster/up running)
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    ENV, REPO, admin_get, exit_on_error, free_port, kubectl, measure, render_testdata, rss_mib, wait_port,
)


def start_registry(work):
    binary = subprocess.run([REPO / "hack/registry/install"], capture_output=True, text=True, check=True).stdout.split()[-1]
    port = free_port()
    (work / "storage").mkdir()
    config = work / "registry.yml"
    config.write_text(f"version: 0.1\nlog: {{level: error}}\nstorage: {{filesystem: {{rootdirectory: {work / 'storage'}}}}}\n"
                      f"http: {{addr: 127.0.0.1:{port}}}\n")
    proc = subprocess.Popen([binary, "serve", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(proc, port)
    return proc, f"127.0.0.1:{port}"


def du_mib(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / (1 << 20)


def snapshot_in_use(admin, name, start, timeout=600):
    while True:
        try:
            if any(s["name"] == name for s in json.loads(admin_get(admin, "/debug/catalogs"))):
                return time.time() - start
        except OSError:
            pass
        if time.time() - start > timeout:
            sys.exit(f"{name}: no snapshot after {timeout} s")
        time.sleep(0.05)


def main():
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    olm = Path(os.environ.get("OLM_BIN", REPO / "target/release/olm"))
    if not olm.exists():
        sys.exit("build it first: cargo build --release --bin olm (or OLM_BIN=target/debug/olm)")
    print(f"olm: {olm}")
    work = Path(tempfile.mkdtemp(prefix="olm-bench-images-"))
    procs = []
    ns = f"bench-images-{os.getpid()}"
    try:
        reg, host = start_registry(work)
        procs.append(reg)
        # After the registry starts: it reads REGISTRY_* variables as its own configuration.
        os.environ["REGISTRY_AUTH_FILE"] = str(work / "none.json")
        print(f"registry: {host} (docker-registry 2.8, filesystem storage)")
        bundles = sum(1 for _ in (REPO / "bundles").glob("*/*/metadata/annotations.yaml"))
        for label in ("cold", "unchanged"):
            secs, rss = measure([olm, "catalog", "publish", "--registry", f"{host}/ours", "--bundles", REPO / "bundles",
                                 "--layout", work / "layout-ours", "--catalog-dir", work / "ours-catalog"])
            print(f"our catalog, {bundles} bundle images + catalog image, {label}: {secs:.2f} s, peak RSS {rss:.1f} MiB")

        fbc = work / "testdata"
        packages = render_testdata(olm, fbc)
        size = du_mib(fbc)
        image = f"{host}/testdata/catalog:latest"
        for label in ("cold", "unchanged"):
            secs, rss = measure([olm, "catalog", "build", fbc, "-t", image, "--push", "--layout", work / "layout-td"])
            print(f"testdata catalog image ({size:.1f} MiB FBC, {len(packages)} packages), build + push {label}: "
                  f"{secs:.2f} s, peak RSS {rss:.1f} MiB")

        kubectl("create", "namespace", ns)
        cache = work / "cache"
        for label in ("cold cache", "warm cache (restart)"):
            admin = free_port()
            run = subprocess.Popen([olm, "run", "--leader-elect=false", "--packages-address", "off", "--watch-namespace", ns,
                                    "--admin-address", f"127.0.0.1:{admin}", "--catalog-check-interval", "2s",
                                    "--image-cache-dir", cache], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(run)
            wait_port(run, admin)
            time.sleep(1)
            idle = rss_mib(run.pid)
            start = time.time()
            kubectl("apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "testdata", "namespace": ns},
                "spec": {"sourceType": "grpc", "image": image}}))
            loaded = snapshot_in_use(admin, "testdata", start)
            time.sleep(3)
            print(f"olm run, image catalog of the testdata, {label}: pull + load {loaded:.2f} s; "
                  f"RSS idle {idle:.1f} MiB, holding it {rss_mib(run.pid):.1f} MiB")
            run.kill()
            run.wait()
            kubectl("delete", "catalogsource", "testdata", "-n", ns)
    finally:
        for p in procs:
            p.kill()
        subprocess.run(["kubectl", "delete", "namespace", ns, "--wait=false"], env=ENV, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    exit_on_error(main)
