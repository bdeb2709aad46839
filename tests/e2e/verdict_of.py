"""verdict_of.py VERDICT MAPPING LEVEL: the fabric verdict (`qoslane fabric
audit --verdict`) is of MAPPING (its bytes' SHA-256, as the nodes compare it),
names HCA ports, and LEVEL is lost on none of them. Says what it found."""
import hashlib
import json
import sys

path, mapping, level = sys.argv[1:4]
v = json.load(open(path))
want = hashlib.sha256(open(mapping, "rb").read()).hexdigest()
levels = {l["level"]: l for l in v.get("levels", [])}
print(f"verdict {path}: schema {v.get('version')}, made {v.get('made')} on {v.get('host')}, "
      f"mapping {v.get('mapping_sha256')} (want {want}), {len(v.get('hcas', []))} HCA ports, "
      f"levels {sorted(levels)}", file=sys.stderr)
ok = (v.get("version") == 1 and v.get("mapping_sha256") == want and v.get("hcas")
      and level in levels and not levels[level]["lost"] and not levels[level].get("credit_loop"))
sys.exit(0 if ok else 1)
