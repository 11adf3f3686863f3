#!/usr/bin/env python3
"""Write the facts of Apache Kafka's JSON message and record specs as one compact table.

Where the facts come from: Apache Kafka 4.3.1's JSON specs,
  clients/src/main/resources/common/message/*.json             (requests, responses, headers,
                                                               ConsumerProtocol*)
  group-coordinator/src/main/resources/common/message/*.json   (__consumer_offsets records)
  transaction-coordinator/src/main/resources/common/message/*.json  (__transaction_state records)
  share-coordinator/src/main/resources/common/message/*.json   (__share_group_state records)
as published in Kafka's source tree at the 4.3.1 release.

What is kept: for each spec its name, type, apiKey, validVersions, flexibleVersions,
latestVersionUnstable and deprecatedVersions; for each field (recursively, and in commonStructs)
its name, type, versions, nullableVersions, taggedVersions, tag, default and flexibleVersions.
Everything else (the ``about`` prose, comments, entity types, map keys, listeners) is dropped.

The table (``tests/kafka_spec/kafka-4.3.json``) is what the conformance tests check kgroup's
declarative definitions against; kgroup never reads it at run time. Regenerate it from a Kafka
checkout with

    python scripts/kafka_spec_facts.py --messages DIR [DIR ...] --records DIR [DIR ...] \
        > tests/kafka_spec/kafka-4.3.json

(messages: the clients' message folder; records: the coordinators' folders).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

SPEC_KEYS = ("name", "type", "apiKey", "validVersions", "flexibleVersions", "latestVersionUnstable",
             "deprecatedVersions")
FIELD_KEYS = ("name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default",
              "flexibleVersions")


def read_spec(path: pathlib.Path) -> dict:
    """Kafka's specs are JSON with ``//`` line comments."""
    return json.loads(re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M))


def field_facts(field: dict) -> dict:
    out = {k: field[k] for k in FIELD_KEYS if k in field}
    if "fields" in field:
        out["fields"] = [field_facts(f) for f in field["fields"]]
    return out


def spec_facts(spec: dict) -> dict:
    out = {k: spec[k] for k in SPEC_KEYS if k in spec}
    out["fields"] = [field_facts(f) for f in spec.get("fields", [])]
    if "commonStructs" in spec:
        out["commonStructs"] = [{"name": c["name"], "versions": c.get("versions"),
                                 "fields": [field_facts(f) for f in c["fields"]]}
                                for c in spec["commonStructs"]]
    return out


def collect(dirs: list[str]) -> dict:
    table = {}
    for d in dirs:
        for path in sorted(pathlib.Path(d).glob("*.json")):
            spec = read_spec(path)
            table[spec["name"]] = spec_facts(spec)
    return dict(sorted(table.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", nargs="+", required=True, help="folders of message specs")
    ap.add_argument("--records", nargs="+", required=True, help="folders of record specs")
    args = ap.parse_args(argv)
    table = {"source": "Apache Kafka 4.3.1 JSON message and record specs (facts only)",
             "messages": collect(args.messages), "records": collect(args.records)}
    # One spec per line: small diffs when a spec changes, and still one JSON document.
    out = sys.stdout
    out.write('{"source": %s,\n' % json.dumps(table["source"]))
    for section in ("messages", "records"):
        out.write(' "%s": {\n' % section)
        items = list(table[section].items())
        for i, (name, facts) in enumerate(items):
            sep = "," if i < len(items) - 1 else ""
            out.write("  %s: %s%s\n" % (json.dumps(name), json.dumps(facts, separators=(",", ":")), sep))
        out.write(" }%s\n" % ("," if section == "messages" else ""))
    out.write("}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
