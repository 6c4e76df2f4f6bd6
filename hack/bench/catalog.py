#!/usr/bin/env python3
"""Benchmark: render + validate of the community-operators testdata (or --catalog DIR, a
catalog repository), `olm` against upstream `opm` side by side in one run: median wall time,
peak RSS and the ratios opm/olm. Method: hack/bench/README.md.

Usage: hack/bench/catalog.py [--runs N] [--catalog DIR]   (needs target/release/olm and hack/opm/build)
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, TESTDATA, measure, opm_path, replicated_catalog, testdata_packages  # noqa: E402


def median_of(runs, cmd, stdout_path=None):
    samples = [measure(cmd, stdout_path) for _ in range(runs)]
    return statistics.median(s[0] for s in samples), max(s[1] for s in samples)


def bundle_dirs(root=TESTDATA):
    dirs = []
    for pkg in sorted(root.iterdir()):
        if pkg.is_dir():
            dirs += [d for d in sorted(pkg.iterdir()) if (d / "metadata/annotations.yaml").is_file()]
    return dirs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--catalog", type=Path, help="a catalog repository (operators/<package>/<bundle>/)")
    args = ap.parse_args()
    olm = REPO / "target/release/olm"
    if not olm.exists():
        sys.exit("build it first: cargo build --release --bin olm")
    opm = opm_path()
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
        measure([olm, "catalog", "render", *testdata_packages()], base / "catalog.json")
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
