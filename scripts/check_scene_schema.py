#!/usr/bin/env python3
"""Validate scene files against the published JSON Schema (docs/scene.schema.json) with an
independent validator (Python `jsonschema`, `pip install jsonschema`), as an editor would.

    scripts/check_scene_schema.py [SCENE.toml ...]     (default: scenes/*.toml)

Exit status 1 when a file does not validate. A file that validates can still be refused by
diffphd for value ranges and cross-key rules (the schema states types, keys and defaults).
"""
import glob
import json
import sys
import tomllib
from pathlib import Path

import jsonschema

root = Path(__file__).resolve().parent.parent
schema = json.loads((root / "docs" / "scene.schema.json").read_text())
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
files = sys.argv[1:] or sorted(glob.glob(str(root / "scenes" / "*.toml")))
bad = 0
for f in files:
    with open(f, "rb") as fh:
        scene = tomllib.load(fh)
    errors = sorted(validator.iter_errors(scene), key=lambda e: list(e.path))
    name = Path(f).name
    if errors:
        bad += 1
        for e in errors[:5]:
            print(f"{name}: {'.'.join(map(str, e.path)) or '(root)'}: {e.message}")
    else:
        print(f"{name}: valid")
# A typo must be caught: an unknown key in [solver].
typo = {"schema_version": 1, "solver": {"rel_tool": 1e-4}}
assert not validator.is_valid(typo), "the schema must refuse unknown keys"
print(f"{len(files) - bad}/{len(files)} valid; unknown key solver.rel_tool refused")
sys.exit(1 if bad else 0)
