#!/usr/bin/env python3
"""Benchmark: `olm run` against hostile catalogs. Runs tests/cluster/hostile_catalogs.rs one
test at a time and prints the figures they record: peak RSS per case, the slowest /readyz, and
update times of healthy CatalogSources beside broken ones. Method: hack/bench/README.md.

Usage: hack/bench/hostile.py [--release] [--json] [FILTER]
       (needs the control plane from hack/cluster/up; FILTER narrows the tests, default all)
"""
import argparse, json, os, subprocess, sys, tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ written next to the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import KUBECONFIG, REPO  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--release", action="store_true", help="build olm with --release (as shipped)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("filter", nargs="?", default="hostile_catalogs::")
    args = ap.parse_args()

    if not Path(KUBECONFIG).exists():
        sys.exit(f"no control plane ({KUBECONFIG}); start one with hack/cluster/up")
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as figures:
        env = dict(os.environ, KUBECONFIG=KUBECONFIG, OLM_HOSTILE_FIGURES=figures.name)
        cmd = ["cargo", "test", "--features", "cluster-tests", "--test", "cluster"]
        if args.release:
            cmd.append("--release")
        cmd += ["--", "--test-threads=1", args.filter]
        print("running:", " ".join(cmd), file=sys.stderr)
        run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stdout[-6000:] + run.stderr[-6000:])
            sys.exit(f"the hostile-catalog tests failed (exit {run.returncode})")
        rows = [json.loads(line) for line in figures.read().splitlines() if line.strip()]

    table = {}
    for row in rows:
        table.setdefault(row["case"], {})[row["figure"]] = row["value"]
    if args.json:
        print(json.dumps(table, indent=2))
        return
    build = "release" if args.release else "debug"
    print(f"olm run against hostile catalogs ({build} build)")
    print(f"{'case':<24}{'peak RSS MiB':>14}{'slowest /readyz ms':>20}")
    for case, figs in table.items():
        print(f"{case:<24}{figs.get('peak_rss_mib', 0):>14.1f}{figs.get('readyz_slowest_ms', 0):>20.0f}")
    many = table.get("100-sources-50-broken")
    if many:
        print()
        print("100 CatalogSources, 50 broken (slow, silent, unresponsive, cut, 100 MB, flood, refused):")
        print(f"  new content of the healthy server in use by the first healthy source: "
              f"{many['first_healthy_update_ms'] / 1000:.1f} s, by all 50: {many['all_healthy_updated_ms'] / 1000:.1f} s")
        print(f"  RSS of olm run afterwards: {many['rss_now_mib']:.1f} MiB")
    alone = table.get("50-sources-0-broken")
    if many and alone:
        print(f"  the same 50 healthy sources alone: first {alone['first_healthy_update_ms'] / 1000:.1f} s, "
              f"all {alone['all_healthy_updated_ms'] / 1000:.1f} s "
              f"(with 50 broken: x{many['all_healthy_updated_ms'] / alone['all_healthy_updated_ms']:.2f} for all)")


if __name__ == "__main__":
    main()
