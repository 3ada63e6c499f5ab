"""Validate JSON instances against msgx's JSON Schemas with Python's jsonschema.

The schemas are loaded as an integrator loads them: every file of the schemas
directory as it is, registered under its own $id (no URI written by hand), so
that their relative $refs ("flight.json") resolve against that $id.

argv[1]: the schemas directory (deploy/schemas).
stdin:   a JSON array of {"schema": "msgx.msg.json", "what": "...", "instance": ...}.
stdout:  one line per instance that does not validate; exit status 1 if any.
"""
import json
import pathlib
import sys

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

schemas = pathlib.Path(sys.argv[1])
resources = [Resource.from_contents(json.loads(p.read_text())) for p in sorted(schemas.glob("*.json"))]
registry = resources @ Registry()
validators = {}
bad = 0
for check in json.load(sys.stdin):
    name = check["schema"]
    if name not in validators:
        validators[name] = Draft202012Validator(
            json.loads((schemas / name).read_text()),
            registry=registry,
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        )
    errors = list(validators[name].iter_errors(check["instance"]))
    if errors:
        bad += 1
        e = errors[0]
        where = "/" + "/".join(str(p) for p in e.absolute_path)
        print(f"{check['what']}: {e.message} at {where} ({len(errors)} error(s))")
sys.exit(1 if bad else 0)
