"""cmpblocks.py A B: compares two printMsg / printMsg-style outputs (real mqadmin's and ours) block
by block, a block being a "minOffset=..." header and the lines under it (one per queue), so that the
order in which the queues are printed does not matter. Prints the first differing line of each
differing block, then "same" or "DIFF"."""

import sys


def blocks(p):
    out: dict[str, list[str]] = {}
    cur = None
    with open(p, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("minOffset="):
                cur = line
                out[cur] = []
            elif cur is not None:
                out[cur].append(line)
            else:
                out.setdefault("_pre", []).append(line)
    return out


a = blocks(sys.argv[1])
b = blocks(sys.argv[2])
if set(a) != set(b):
    print("block headers differ:", sorted(set(a) ^ set(b)))
for k in a:
    if k in b and a[k] != b[k]:
        print("block differs:", k.strip())
        for x, y in zip(a[k], b[k], strict=False):  # (lengths may differ)
            if x != y:
                print(" <", x.rstrip()[:3000])
                print(" >", y.rstrip()[:3000])
                break
        if len(a[k]) != len(b[k]):
            print(" lengths", len(a[k]), len(b[k]))
print("same" if a == b else "DIFF")
