#!/usr/bin/env python3
"""Benchmark: render + validate of the community-operators testdata, `olm` against upstream
`opm`, side by side in one run. Prints median wall time and peak RSS per step and size, and
the ratio opm/olm. Sizes grow by taking more bundles (render) and by replicating the
catalog under new package names (validate), to show how cost grows with catalog size.

With --catalog DIR (a catalog repository with an `operators/<package>/<bundle>/` tree, e.g. a
checkout of the public community catalog), measures instead, once each: rendering all its
bundle directories, and validating the FBC of its packages (those `olm catalog render`
renders, as one catalog); a tool that refuses the catalog is still timed.

Usage: hack/bench/catalog.py [--runs N] [--catalog DIR]   (needs target/release/olm and hack/opm/build)
"""
import argparse, json, os, re, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("OLM_SHARED_DIR", REPO.parent / "shared"))
TESTDATA = SHARED / "testdata/community-operators/operators"


GNU_TIME = "/usr/bin/time"


def measure(cmd, stdout_path=None, check=True):
    """Runs cmd; returns (seconds, peak RSS in MiB) of that command alone. GNU time reports
    the RSS, because a forked child's maxrss would also count this Python process's pages."""
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit("needs GNU time: apt-get install time")
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    env = {k: v for k, v in os.environ.items() if k != "OLM_CACHE_DIR"}
    start = time.perf_counter()
    proc = subprocess.run([GNU_TIME, "-f", "maxrss=%M", *map(str, cmd)], stdout=out, stderr=subprocess.PIPE, env=env)
    elapsed = time.perf_counter() - start
    if stdout_path:
        out.close()
    stderr = proc.stderr.decode()
    if proc.returncode != 0 and check:
        sys.exit(f"{' '.join(map(str, cmd[:3]))} … failed: {stderr[-2000:]}")
    rss_kib = int(re.findall(r"maxrss=(\d+)", stderr)[-1])
    return elapsed, rss_kib / 1024


def median_of(runs, cmd, stdout_path=None):
    samples = [measure(cmd, stdout_path) for _ in range(runs)]
    return statistics.median(s[0] for s in samples), max(s[1] for s in samples)


def bundle_dirs(root=TESTDATA):
    dirs = []
    for pkg in sorted(root.iterdir()):
        if pkg.is_dir():
            dirs += [d for d in sorted(pkg.iterdir()) if (d / "metadata/annotations.yaml").is_file()]
    return dirs


def replicated_catalog(base_file, copies, dest):
    """The catalog `copies` times, each copy's packages renamed, as one FBC directory."""
    text = base_file.read_text()
    blobs = [json.loads(b) for b in split_json_stream(text)]
    names = sorted({b.get("package") or b["name"] for b in blobs if b["schema"] in ("olm.package", "olm.channel", "olm.bundle")})
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / "catalog.json", "w") as f:
        for i in range(copies):
            rename = {n: f"{n}-c{i}" for n in names}
            for b in blobs:
                b = json.loads(json.dumps(b))
                if b["schema"] == "olm.package":
                    b["name"] = rename[b["name"]]
                elif "package" in b:
                    b["package"] = rename.get(b["package"], b["package"])
                if b["schema"] == "olm.bundle":
                    for p in b.get("properties", []):
                        if p["type"] == "olm.package":
                            p["value"]["packageName"] = rename.get(p["value"]["packageName"], p["value"]["packageName"])
                f.write(json.dumps(b) + "\n")
    return len([b for b in blobs if b["schema"] == "olm.bundle"]) * copies


def split_json_stream(text):
    decoder, i, out = json.JSONDecoder(), 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, end = decoder.raw_decode(text, i)
        out.append(json.dumps(obj))
        i = end


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--catalog", type=Path, help="a catalog repository (operators/<package>/<bundle>/)")
    args = ap.parse_args()
    olm = REPO / "target/release/olm"
    if not olm.exists():
        sys.exit("build it first: cargo build --release --bin olm")
    opm = subprocess.run([REPO / "hack/opm/build"], capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    work = Path(tempfile.mkdtemp(prefix="olm-bench-"))
    rows = []
    try:
        if args.catalog:
            rows = whole_repository(args.catalog / "operators", olm, opm, work)
            args.runs = 1
            return report(args, rows)
        dirs = bundle_dirs()
        template = "quay.io/olm-rs/{{.Package}}-bundle:v{{.Version}}"
        for fraction in (4, 2, 1):
            subset = [str(d) for d in dirs[: len(dirs) // fraction]]
            for tool, cmd in (("olm", [olm, "catalog", "render", "--image-template", template, *subset]),
                              ("opm", [opm, "render", "--alpha-image-ref-template", template, "-o", "json", *subset])):
                t, rss = median_of(args.runs, cmd)
                rows.append(("render bundles", len(subset), tool, t, rss))

        # The whole testdata as one catalog (packages with channels), rendered by olm.
        base = work / "base"
        base.mkdir()
        packages = [str(p) for p in sorted(TESTDATA.iterdir()) if p.is_dir() and p.name != "kuadrant-operator"]
        measure([olm, "catalog", "render", *packages], base / "catalog.json")
        for copies in (1, 4, 16):
            cat = work / f"x{copies}"
            n = replicated_catalog(base / "catalog.json", copies, cat)
            for tool, cmd in (("olm", [olm, "catalog", "validate", cat]), ("opm", [opm, "validate", cat])):
                t, rss = median_of(args.runs, cmd)
                rows.append(("validate catalog", n, tool, t, rss))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(args, rows)


def whole_repository(root, olm, opm, work):
    """Render every bundle directory, then validate the packages' FBC, with both tools."""
    rows = []
    # Directories without manifests/ are not bundles either tool renders (opm stops at them).
    dirs = [str(d) for d in bundle_dirs(root) if (d / "manifests").is_dir()]
    template = "quay.io/olm-rs/{{.Package}}-bundle:v{{.Version}}"
    # Both tools read 2.4 GB of YAML: read it once first, so that neither pays for a cold
    # page cache (the first to run would otherwise time the disk, not itself).
    warm = sum(len(open(os.path.join(d, f), "rb").read()) for d, _, files in os.walk(root) for f in files)
    print(f"page cache warmed: {warm / 1e9:.1f} GB read")
    for tool, cmd in (("olm", [olm, "catalog", "render", "--image-template", template, *dirs]),
                      ("opm", [opm, "render", "--alpha-image-ref-template", template, "-o", "json", *dirs])):
        t, rss = measure(cmd)
        rows.append(("render bundles", len(dirs), tool, t, rss))
    fbc = work / "fbc"
    bundles = 0
    for pkg in sorted(p for p in root.iterdir() if p.is_dir()):
        out = fbc / pkg.name
        out.mkdir(parents=True)
        with open(out / "catalog.json", "wb") as f:
            ok = subprocess.run([olm, "catalog", "render", "--image-template", template, pkg], stdout=f, stderr=subprocess.DEVNULL).returncode == 0
        if ok:
            bundles += sum(1 for line in open(out / "catalog.json") if line.strip().replace(" ", "") in ('"schema":"olm.bundle"', '"schema":"olm.bundle",'))
        else:
            shutil.rmtree(out)
    for tool, cmd in (("olm", [olm, "catalog", "validate", fbc]), ("opm", [opm, "validate", fbc])):
        t, rss = measure(cmd, check=False)
        rows.append(("validate catalog", bundles, tool, t, rss))
    return rows


def report(args, rows):
    print(f"median of {args.runs} runs; peak RSS is the largest seen")
    print(f"{'step':<18}{'bundles':>8}  {'olm s':>8} {'opm s':>8} {'speedup':>8}  {'olm MiB':>8} {'opm MiB':>8} {'mem ratio':>9}")
    by_key = {}
    for step, n, tool, t, rss in rows:
        by_key.setdefault((step, n), {})[tool] = (t, rss)
    for (step, n), tools in by_key.items():
        (ot, orss), (pt, prss) = tools["olm"], tools["opm"]
        print(f"{step:<18}{n:>8}  {ot:>8.3f} {pt:>8.3f} {pt / ot:>7.1f}x  {orss:>8.1f} {prss:>8.1f} {prss / orss:>8.1f}x")


if __name__ == "__main__":
    main()
