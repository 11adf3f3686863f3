#!/usr/bin/env python3
"""Run the client compatibility matrix and print the README's table.

    .venv/bin/python scripts/compat_matrix.py [--long] [--junit FILE] [--json FILE] [--from-junit FILE] [-- PYTEST ARGS]

Runs ``pytest -m matrix tests/interop`` (the tests in tests/interop/test_matrix_*.py, each
labelled with its client and scenario through junit properties), keeps the junit XML and a JSON
summary, and prints a Markdown table: client, version, the API versions it negotiated with
kgroup (recorded through a proxy by test_matrix_versions.py / test_matrix_burrow.py), each
scenario's pass/FAIL, and the date. ``--from-junit`` renders an existing report without running.
Exits non-zero when any matrix test failed (or none ran).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CLIENTS = ["kafka-python", "aiokafka", "confluent-kafka", "kcat", "kafkajs", "Burrow",
           "confluent-kafka.consumer", "kgroup.consumer"]
# rows whose client name is not what the table shows: the same client with KIP-848's consumer group
# protocol (kcat 1.7.1's librdkafka 2.0.2 has no group.protocol; the other clients lack it too)
LABELS = {"confluent-kafka.consumer": "confluent-kafka, `group.protocol=consumer`",
          "kgroup.consumer": "kgroup client, `group.protocol=consumer`"}
VOTERS = ["kafka-python", "aiokafka", "confluent-kafka", "kcat", "kafkajs"]  # the mixed voting group
# table column -> scenario names (prefix match), and how a scenario is shown inside the cell
COLUMNS = [
    ("Produce", ("produce",)),
    ("Group consume", ("consume-", "incremental-assign")),
    ("Commit + resume after broker restart", ("commit-resume-after-restart",)),
    ("Static membership", ("static-membership",)),
    ("Admin / monitoring", ("admin", "metadata-L", "lag-equals-kgroup-describe")),
    ("SIGKILLed member taken over", ("sigkill-takeover",)),
    ("Rides through COORDINATOR_LOAD_IN_PROGRESS", ("coordinator-load-in-progress",)),
    ("Protocol vote / INCONSISTENT_GROUP_PROTOCOL", ("protocol-vote", "inconsistent-group-protocol")),
    ("Transactions / EOS", ("transactions-eos",)),
    ("Soak: mixed group, member + broker SIGKILLs (--long)", ("soak-kills",)),
]
SHORT = {"produce": "default", "produce-idempotent-default": "idempotent (default)", "produce-idempotent": "idempotent",
         "produce-plain": "plain", "incremental-assign": "incremental assign", "consume-balanced": "balanced -G",
         "consume-roundrobin-default": "roundrobin (default)", "admin": "admin API", "metadata-L": "-L",
         "lag-equals-kgroup-describe": "lag = kgroup groups --describe",
         "admin-partitions-configs-records": "partitions, configs, delete records", "protocol-vote": "vote",
         "inconsistent-group-protocol": "refused + reported", "soak-kills": "15 cycles",
         "transactions-eos": "commit + abort, offsets, read_committed",
         "transactions-eos-read-committed": "read_committed reader", "consume-uniform": "uniform (server-side)"}


def run_pytest(junit: str, long: bool, extra: list[str]) -> int:
    cmd = [sys.executable, "-m", "pytest", "-m", "matrix", "tests/interop", "-p", "no:cacheprovider",
           f"--junitxml={junit}", "-o", "junit_family=xunit1", "-q", *(["--long"] if long else []), *extra]
    print("==> " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.call(cmd, cwd=ROOT)


def read_junit(path: str) -> list[dict]:
    cases = []
    for tc in ET.parse(path).iter("testcase"):
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        if "matrix_client" not in props:
            continue
        outcome = "pass"
        for tag in ("failure", "error"):
            if tc.find(tag) is not None:
                outcome = "FAIL"
        if tc.find("skipped") is not None:
            outcome = "SKIP"
        cases.append({"test": f"{tc.get('classname')}::{tc.get('name')}", "client": props["matrix_client"],
                      "scenario": props["matrix_scenario"], "outcome": outcome, "seconds": float(tc.get("time") or 0),
                      "props": props})
    return cases


def versions_of(client: str) -> str:
    try:
        if client == "Burrow":
            out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "burrow"], capture_output=True, text=True)
            return (out.stdout.strip() or "?") + " (sarama 1.22)"
        from tests.interop.test_matrix_harness import client_version
        return client_version(client)
    except Exception as e:  # noqa: BLE001
        return f"? ({e})"


def summarize(cases: list[dict]) -> dict:
    """{client: {"version", "api_versions", "software", "columns": {column: [(label, outcome)]}}}"""
    out = {c: {"version": versions_of(c), "api_versions": "", "software": "", "columns": {}} for c in CLIENTS}
    for case in cases:
        clients = VOTERS if case["client"] == "all" else [case["client"]]
        scenario = case["scenario"]
        for client in clients:
            row = out.setdefault(client, {"version": "?", "api_versions": "", "software": "", "columns": {}})
            if scenario == "api-versions" or case["props"].get("api_versions") and client == "Burrow":
                row["api_versions"] = case["props"].get("api_versions", "")
                row["software"] = case["props"].get("client_software", "")
                row["versions_outcome"] = case["outcome"] if scenario == "api-versions" else row.get("versions_outcome", "pass")
                if scenario == "api-versions":
                    continue
            for column, prefixes in COLUMNS:
                if any(scenario == p or scenario.startswith(p) for p in prefixes):
                    label = SHORT.get(scenario, scenario.replace("consume-", ""))
                    row["columns"].setdefault(column, []).append((label, case["outcome"]))
                    break
    return out


def cell(results: list[tuple]) -> str:
    if not results:
        return "—"
    merged: dict = {}
    for label, outcome in results:  # one label may come from several tests: all must pass
        merged[label] = outcome if merged.get(label, "pass") == "pass" else merged[label]
    if all(o == "pass" for o in merged.values()):
        return "pass: " + ", ".join(merged)
    return ", ".join(f"{label} **{o}**" if o != "pass" else f"{label} pass" for label, o in merged.items())


def render(summary: dict, date: str) -> str:
    head = ["Client", "Version", "API versions negotiated"] + [c for c, _ in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for client in CLIENTS:
        row = summary.get(client)
        if row is None:
            continue
        api = row["api_versions"] or "—"
        if row.get("versions_outcome") == "FAIL":
            api += " **FAIL**"
        lines.append("| " + " | ".join([LABELS.get(client, client), row["version"], api] +
                                       [cell(row["columns"].get(c, [])) for c, _ in COLUMNS]) + " |")
    lines.append("")
    lines.append(f"Measured {date} by `scripts/compat_matrix.py` (`pytest -m matrix tests/interop`) against kgroup "
                 "on 127.0.0.1. API versions: every request each client sent in a produce / group-consume / admin "
                 "session, seen by a recording proxy; all lie in kgroup's advertised ranges.")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--long", action="store_true", help="include the long soak runs")
    p.add_argument("--junit", help="where to keep the junit XML (default: a temporary file)")
    p.add_argument("--json", help="also write the summary as JSON here")
    p.add_argument("--from-junit", help="render this junit XML instead of running the tests")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = p.parse_args(argv)
    if args.from_junit:
        junit, rc = args.from_junit, 0
    else:
        junit = args.junit or os.path.join(tempfile.mkdtemp(prefix="compat-matrix-"), "junit.xml")
        rc = run_pytest(junit, args.long, args.pytest_args)
    cases = read_junit(junit)
    date = datetime.date.today().isoformat()
    summary = summarize(cases)
    print(render(summary, date))
    failed = [c for c in cases if c["outcome"] != "pass"]
    print(f"\n{len(cases) - len(failed)} passed, {len(failed)} failed (junit: {junit})", file=sys.stderr)
    for c in failed:
        print(f"  {c['outcome']}: {c['test']}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": date, "junit": junit, "cases": cases,
                       "clients": {k: {**v, "columns": {c: list(map(list, r)) for c, r in v["columns"].items()}}
                                   for k, v in summary.items()}}, f, indent=2)
    if not cases:
        print("no matrix test ran", file=sys.stderr)
        return 1
    return 1 if failed or rc not in (0,) else 0


if __name__ == "__main__":
    sys.exit(main())
