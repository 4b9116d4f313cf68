"""jcmp.py A B: compares two JSON files as fastjson writes them (A: real mqadmin's, e.g.
exportMetadata's metadata.json; B: ours) structurally: fastjson's unquoted integer map keys are
accepted; prints one line per key present on one side only and per differing value (nothing when
they are equal)."""

import json
import re
import sys


def load(p):
    with open(p, encoding="utf-8") as f:
        t = f.read()
    t = re.sub(r"([{,]\s*)(-?\d+):", r'\1"\2":', t)  # fastjson's unquoted int keys
    return json.loads(t)


def walk(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                print(f"{path}/{k}: only ours = {json.dumps(b[k])[:200]}")
            elif k not in b:
                print(f"{path}/{k}: only mqadmin = {json.dumps(a[k])[:200]}")
            else:
                walk(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            walk(x, y, f"{path}[{i}]")
    elif a != b:
        print(f"{path}: mqadmin={json.dumps(a)[:200]} ours={json.dumps(b)[:200]}")


a = load(sys.argv[1])
b = load(sys.argv[2])
walk(a, b)
