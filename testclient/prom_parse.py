"""Parses a Prometheus text exposition (stdin) with the reference parser, prometheus_client's,
and prints every sample as one JSON line: {"name", "labels", "value", "type"}.

The Java integration tests use it so that /metrics is checked by a real Prometheus parser, not
only by our own reading of it. Exit code 1 when the text does not parse.
"""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    text = sys.stdin.read()
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                print(json.dumps({"name": sample.name, "labels": sample.labels, "value": sample.value,
                                  "type": family.type}))
    except Exception as exc:  # the parser raises ValueError and friends on bad input
        print(f"PARSE ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
