#!/usr/bin/env python3
"""Benchmark: catalog images with no container engine. Prints, for `olm` (release build):
- build + push time and peak RSS of our whole catalog (`olm catalog publish`: every bundle of
  bundles/ as an image, then the catalog image) and of the community-operators testdata as one
  catalog image (`olm catalog build --push`), cold (empty registry) and again (unchanged: no
  blob uploaded), against Debian's docker-registry on loopback;
- pull + load time of that testdata catalog image in `olm run` (CatalogSource spec.image → its
  snapshot in use; cold cache, then a restart with the cache kept) and the RSS of `olm run`
  holding it, with and without (idle) the catalog.

There is no upstream peer for build + push here: opm builds catalog and bundle images only
through docker/podman/buildah (`opm index add`, `opm alpha bundle build`; `opm generate
dockerfile` only writes a Dockerfile), and no container engine runs on this machine.

Usage: hack/bench/images.py   (needs target/release/olm or OLM_BIN=..., GNU time, hack/cluster/up running)
"""
import json, os, shutil, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalog import REPO, TESTDATA, measure  # noqa: E402
from run import ENV, get, kubectl, rss_mib, wait_port  # noqa: E402
from serve import free_port  # noqa: E402


def start_registry(work):
    binary = subprocess.run([REPO / "hack/registry/install"], capture_output=True, text=True, check=True).stdout.split()[-1]
    port = free_port()
    (work / "storage").mkdir()
    config = work / "registry.yml"
    config.write_text(f"version: 0.1\nlog: {{level: error}}\nstorage: {{filesystem: {{rootdirectory: {work / 'storage'}}}}}\n"
                      f"http: {{addr: 127.0.0.1:{port}}}\n")
    proc = subprocess.Popen([binary, "serve", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, f"127.0.0.1:{port}"


def du_mib(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / (1 << 20)


def snapshot_in_use(admin, name, start, timeout=600):
    while True:
        try:
            if any(s["name"] == name for s in json.loads(get(admin, "/debug/catalogs"))):
                return time.time() - start
        except OSError:
            pass
        if time.time() - start > timeout:
            sys.exit(f"{name}: no snapshot after {timeout} s")
        time.sleep(0.05)


def main():
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
        fbc.mkdir()
        packages = [str(p) for p in sorted(TESTDATA.iterdir()) if p.is_dir() and p.name != "kuadrant-operator"]  # opm refuses it too
        with open(fbc / "catalog.json", "wb") as f:
            subprocess.run([olm, "catalog", "render", *packages], stdout=f, check=True)
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
            wait_port(admin, run)
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
    main()
