"""The property fuzzer of issue 12: random schema stories of a sharded table, played
through `replicator.schema.plan.Player` against real MariaDB shards and a real downstream
table, with the properties P0-P6 checked after every step.

- `generator`: the seeded story generator (scenario dicts in `plan`'s YAML format);
  `columns`: the random column definitions and type moves it uses;
- `oracle`: the shards' tables, the coordinator, the downstream table and the checks;
  `rows`: sample rows and the applier-like row copy (shared with the scenario tests);
  `lineage`: which column holds which data across renames (P3);
- `runner`: one story, generated or replayed; `shrinker`: delta debugging of a
  violating story; `story`: the YAML form and an offline stand-in for the server;
- `__main__`: `python -m tests.fuzz --seed S --count N [--jobs J] [--out DIR]
  [--replay FILE.yaml] [--verbose]`, which `make fuzz` runs.
"""
