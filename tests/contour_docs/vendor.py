#!/usr/bin/env python3
"""Copy the YAML examples of Contour's configuration docs into ``examples/``.

Usage: ``python3 tests/contour_docs/vendor.py CONTOUR_GIT_DIR`` (a clone of projectcontour/contour; its
committed ``HEAD`` is read, so a bare mirror works too).  Every fenced ``yaml`` block of
``site/content/docs/main/config/*.md`` that holds a whole object of a kind cpx serves becomes
``examples/<doc>-<n>.yaml``, headed by where it came from.  Fragments (blocks with ``...``) and
blocks of other kinds (Deployments, status dumps, Contour's own config) or with
only Services and Secrets are skipped.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

KINDS = {"HTTPProxy", "Ingress", "TLSCertificateDelegation", "ExtensionService", "Secret", "Service"}
BLOCK = re.compile(r"```ya?ml\n(.*?)```", re.S)
OUT = Path(__file__).resolve().parent / "examples"


def main(checkout: Path) -> None:
    commit = subprocess.check_output(["git", "-C", str(checkout), "rev-parse", "HEAD"], text=True).strip()
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.yaml"):
        old.unlink()
    docs = "site/content/docs/main/config/"
    git = ["git", "-C", str(checkout)]
    names = subprocess.check_output([*git, "ls-tree", "--name-only", "HEAD", docs], text=True).split()
    for path in sorted(n for n in names if n.endswith(".md")):
        doc = Path(path)
        text = subprocess.check_output([*git, "show", f"HEAD:{path}"], text=True)
        for number, block in enumerate(BLOCK.findall(text), start=1):
            if any(line.strip() == "..." for line in block.splitlines()):
                continue  # an excerpt ("..." elides fields; YAML would read it as a document end)
            try:
                objects = [o for o in yaml.safe_load_all(block) if o]
            except yaml.YAMLError:
                continue  # a fragment with "..." or a status dump
            if not objects or not all(isinstance(o, dict) and o.get("kind") in KINDS for o in objects):
                continue
            if all(o["kind"] in ("Service", "Secret") for o in objects):
                continue  # a Service or a Secret alone: nothing to serve
            source = f"# projectcontour/contour site/content/docs/main/config/{doc.name}, yaml block {number}"
            header = f"{source}, at {commit}\n"
            (OUT / f"{doc.stem}-{number}.yaml").write_text(header + block)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
