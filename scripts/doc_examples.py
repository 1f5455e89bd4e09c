#!/usr/bin/env python3
"""Counts the public items of the library crates and those whose rustdoc holds a code example.
Usage: python3 scripts/doc_examples.py . [--top] [-v]
  --top: only types, traits and free functions (not methods, constants, modules); -v: list the items without one.
A public item is a line `pub fn|struct|enum|trait|const|type|static|mod` (not pub(crate)) before a #[cfg(test)] module."""
import re, sys, pathlib
root = pathlib.Path(sys.argv[1])
crates = ["factor-graph", "smoothed-inference", "oracles", "structlearn", "datasets", "structlearn-cli"]
pat = re.compile(r'^(\s*)pub (?:unsafe )?(fn|struct|enum|trait|const|type|static|mod) ([A-Za-z_0-9]+)')
TOP = '--top' in sys.argv
tot = ex = 0
per = {}
missing = []
for c in crates:
    n = e = 0
    for f in sorted((root / "crates" / c / "src").rglob("*.rs")):
        if f.name in ("main.rs", "report.rs"): continue
        lines = f.read_text().splitlines()
        # cut at #[cfg(test)]
        for i, l in enumerate(lines):
            if l.strip() == "#[cfg(test)]" and i + 1 < len(lines) and lines[i+1].strip().startswith("mod "):
                lines = lines[:i]; break
        for i, l in enumerate(lines):
            m = pat.match(l)
            if not m: continue
            if TOP and (m.group(1) != '' or m.group(2) in ('mod','const','static')): continue
            if m.group(2) == "mod" and l.rstrip().endswith(";"):
                # module docs live in the module file's //! header
                name = m.group(3)
                cand = [f.parent / f"{name}.rs", f.parent / name / "mod.rs"]
                doc = ""
                for p in cand:
                    if p.exists():
                        doc = "\n".join(x for x in p.read_text().splitlines() if x.strip().startswith("//!"))
                has = "```" in doc
            else:
                j = i - 1
                doc = []
                while j >= 0 and (lines[j].strip().startswith("///") or lines[j].strip().startswith("#[")):
                    doc.append(lines[j]); j -= 1
                has = any("```" in d for d in doc)
            n += 1; e += has
            if not has: missing.append(f"{f.relative_to(root)}:{i+1}: {l.strip()[:90]}")
    per[c] = (e, n); tot += n; ex += e
for c, (e, n) in per.items(): print(f"{c:20} {e:3}/{n:3}")
print(f"{'total':20} {ex:3}/{tot:3}")
if "-v" in sys.argv:
    print("\n".join(missing))
