#!/usr/bin/env python3
"""Every QoS name of a mapping written with flow lists (`qos: [a, b]`), one a line."""
import re
import sys

for line in open(sys.argv[1], encoding="utf-8"):
    m = re.match(r"\s*qos:\s*\[(.*)\]", line)
    if m:
        for name in m.group(1).split(","):
            if name.strip():
                print(name.strip())
