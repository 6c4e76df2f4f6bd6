#!/usr/bin/env python3
"""Spec plan and result table for hack/upstream-e2e.

  table.py plan DRY_RUN.json SKIPS CONTAINERS [FOCUS] -> TSV on stdout, one spec a line:
        run|skip <TAB> container <TAB> file <TAB> line <TAB> full text <TAB> skip reason
  table.py table RUN_DIR             -> the table of RUN_DIR/plan.tsv and RUN_DIR/reports/

SKIPS has one rule a line, `REGEX<TAB>reason` (a regex searched in the spec's full text);
blank lines and lines starting with # are ignored. The first matching rule wins.
"""
import json
import os
import re
import sys
from collections import OrderedDict


def full_text(spec):
    # ginkgo's Spec.Text(): the non-empty texts of the containers and the leaf, space-joined.
    texts = [t for t in spec["ContainerHierarchyTexts"] + [spec["LeafNodeText"]] if t]
    return " ".join(texts)


def container(spec):
    labels = spec.get("ContainerHierarchyLabels") or []
    if labels and labels[0]:
        return labels[0][0]
    return spec["ContainerHierarchyTexts"][0]


def tsv_field(s):
    # Spaces kept as they are: the text is matched exactly (some It texts end in a space).
    return s.replace("\t", " ").replace("\n", " ")


def clean(s):
    return " ".join(s.replace("\t", " ").split())


def plan(dry_run, skips_path, containers, focus=""):
    wanted = set(containers.split(","))
    focus_re = re.compile(focus) if focus else None
    rules = []
    with open(skips_path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            regex, _, reason = line.partition("\t")
            rules.append((re.compile(regex), reason.strip() or "skipped"))
    report = json.load(open(dry_run))[0]
    for spec in report["SpecReports"]:
        if spec["LeafNodeType"] != "It":
            continue
        if spec["State"] == "skipped":  # outside the label filter / focus
            continue
        if container(spec) not in wanted:  # pending specs are listed whatever their labels
            continue
        text = full_text(spec)
        if focus_re and not focus_re.search(text):  # ginkgo lists pending specs unfocused
            continue
        loc = spec["LeafNodeLocation"]
        if spec["State"] == "pending":
            verdict, reason = "skip", "pending upstream (PIt/XIt/XDescribe)"
        else:
            verdict, reason = "run", ""
            for regex, why in rules:
                if regex.search(text):
                    verdict, reason = "skip", why
                    break
        print("\t".join([verdict, container(spec), os.path.basename(loc["FileName"]),
                         str(loc["LineNumber"]), tsv_field(text), reason]))


def first_line(msg):
    """The failure's first line; after a bare "Timed out after 60.000s." also what follows
    (gomega puts the expectation on the next lines), cut to one table line."""
    lines = [clean(l) for l in (msg or "").splitlines() if l.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Error Trace:"):
        # testify (require/assert): the message is what follows "Error:" ("Messages:" too).
        rest = [l for l in lines if not l.startswith(("Error Trace:", "Test:"))
                and not re.match(r"^[\w./@-]+\.(go|s):\d+$", l)]
        return " ".join(l.removeprefix("Error: ") for l in rest)[:240]
    text = lines[0]
    if re.match(r"^Timed out after [0-9.]+s\.$", text) or len(text) < 40:
        text = " ".join(lines[:6])
    return text[:240]


def last_step(spec):
    steps = [e.get("Message", "") for e in spec.get("SpecEvents") or []
             if e.get("SpecEventType") == "By"]
    return clean(steps[-1])[:120] if steps else ""


def result_of(report_path, log_path):
    """(verdict, detail) of one spec process's JSON report."""
    if not os.path.exists(report_path):
        hint = f"no report (killed by the outer timeout?); see {log_path}"
        return "FAIL", hint
    reports = json.load(open(report_path))
    specs = reports[0]["SpecReports"] if reports else []
    before = [s for s in specs if s["LeafNodeType"] == "BeforeSuite"]
    its = [s for s in specs if s["LeafNodeType"] == "It" and s["State"] not in ("skipped", "pending")
           or s["LeafNodeType"] == "It" and s["State"] == "skipped" and s.get("Failure")]
    if before and before[0]["State"] not in ("passed",):
        f = before[0].get("Failure") or {}
        return "FAIL", "BeforeSuite " + before[0]["State"] + ": " + first_line(f.get("Message"))
    if not its:
        return "FAIL", f"the spec did not run; see {log_path}"
    s = its[0]
    state = s["State"]
    f = s.get("Failure") or {}
    if state == "passed":
        return "pass", f"{s['RunTime'] / 1e9:.0f}s"
    if state == "skipped":
        return "skip", "skipped by the spec: " + first_line(f.get("Message"))
    if state in ("timedout", "interrupted"):
        step = last_step(s)
        return "FAIL", (f"{state} after {s['RunTime'] / 1e9:.0f}s"
                        + (f" at step: {step}" if step else "")
                        + (f" ({first_line(f.get('Message'))})" if f.get("Message") else ""))
    loc = f.get("Location") or {}
    where = f"{os.path.basename(loc.get('FileName', ''))}:{loc.get('LineNumber', '')}" if loc else ""
    return "FAIL", f"{first_line(f.get('Message'))} [{where}]"


def table(run_dir):
    rows = []
    with open(os.path.join(run_dir, "plan.tsv")) as f:
        i = 0
        for line in f:
            verdict, cont, file, lineno, text, reason = line.rstrip("\n").split("\t")
            if verdict == "skip":
                rows.append((cont, "skip", text, reason))
                continue
            i += 1
            rep = os.path.join(run_dir, "reports", f"{i}.json")
            done = os.path.join(run_dir, "reports", f"{i}.done")
            if not os.path.exists(done) and not os.path.exists(rep):
                rows.append((cont, "notrun", text, "not run (overall --timeout reached or run aborted)"))
                continue
            v, detail = result_of(rep, os.path.join(run_dir, "logs", f"{i}.log"))
            rows.append((cont, v, text, detail))
    by = OrderedDict()
    for r in rows:
        by.setdefault(r[0], []).append(r)
    out = []
    for cont, rs in by.items():
        out.append(f"== {cont}")
        for _, v, text, detail in rs:
            out.append(f"  {v.upper():6} {text}")
            if detail and v != "pass":
                out.append(f"         -> {detail}")
        out.append("")
    out.append("Totals (passed/run; failed; skipped):")
    tot = {"pass": 0, "run": 0, "FAIL": 0, "skip": 0, "notrun": 0}
    for cont, rs in by.items():
        p = sum(1 for r in rs if r[1] == "pass")
        fl = sum(1 for r in rs if r[1] == "FAIL")
        sk = sum(1 for r in rs if r[1] == "skip")
        nr = sum(1 for r in rs if r[1] == "notrun")
        tot["pass"] += p; tot["run"] += p + fl; tot["FAIL"] += fl; tot["skip"] += sk; tot["notrun"] += nr
        out.append(f"  {cont:26} {p:3}/{p + fl:<3} passed; {fl:3} failed; {sk:3} skipped"
                   + (f"; {nr} not run" if nr else ""))
    out.append(f"  {'ALL':26} {tot['pass']:3}/{tot['run']:<3} passed; {tot['FAIL']:3} failed; "
               f"{tot['skip']:3} skipped" + (f"; {tot['notrun']} not run" if tot["notrun"] else ""))
    print("\n".join(out))


if __name__ == "__main__":
    if sys.argv[1] == "plan":
        plan(*sys.argv[2:6])
    elif sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        sys.exit("usage: table.py plan DRY_RUN.json SKIPS CONTAINERS [FOCUS] | table.py table RUN_DIR")
