#!/usr/bin/env python3
"""Where an audited run's requests went: one client's requests to the API server, grouped by
verb, resource, subresource and scope, with their count, total and p50/p90 server latency
and response codes, busiest first; then that client's requests per minute by verb.

See hack/bench/README.md (audit_summary.py).

Usage: hack/bench/audit_summary.py AUDIT_LOG [--agent PREFIX] [--top N]
"""
import argparse, collections, datetime, json, sys


def timestamp(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("audit_log")
    ap.add_argument("--agent", default="", help="user agent prefix (default: none sent, as OLM's)")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    latencies = collections.defaultdict(list)
    codes = collections.defaultdict(collections.Counter)
    per_minute = collections.defaultdict(collections.Counter)
    first = None
    with open(args.audit_log) as log:
        for line in log:
            event = json.loads(line)
            if event.get("stage") != "ResponseComplete":
                continue
            agent = event.get("userAgent", "")
            if (agent != "") if args.agent == "" else not agent.startswith(args.agent):
                continue
            ref = event.get("objectRef", {})
            watch = event["verb"] == "watch" or "watch=true" in event["requestURI"]
            key = (event["verb"] + (" (watch)" if watch and event["verb"] != "watch" else ""),
                   ref.get("resource", ""), ref.get("subresource") or "",
                   "namespaced" if ref.get("namespace") else "cluster")
            received = timestamp(event["requestReceivedTimestamp"])
            first = received if first is None else min(first, received)
            if not watch:
                latencies[key].append(timestamp(event["stageTimestamp"]) - received)
            codes[key][event.get("responseStatus", {}).get("code")] += 1
            per_minute[int((received - first) // 60)][event["verb"]] += 1
    rows = sorted(codes, key=lambda k: -sum(codes[k].values()))
    print(f"{'requests':>8} {'total s':>9} {'p50 s':>7} {'p90 s':>7}  verb resource/subresource scope  codes")
    for key in rows[:args.top]:
        spent = sorted(latencies[key])
        total = sum(spent)
        p50 = spent[len(spent) // 2] if spent else 0
        p90 = spent[int(len(spent) * 0.9)] if spent else 0
        verb, resource, sub, scope = key
        print(f"{sum(codes[key].values()):8} {total:9.1f} {p50:7.3f} {p90:7.3f}  {verb} "
              f"{resource}{'/' + sub if sub else ''} {scope}  {dict(codes[key])}")
    print("\nper minute from the first request:")
    for minute in sorted(per_minute):
        print(f"  {minute:3}: {dict(per_minute[minute])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
