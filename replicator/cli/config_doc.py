"""The configuration reference (docs/reference/configuration.md), rendered from the config model:
every section and key of replicator/config_keys.py with its type, default and help, the defaults
of keys the model holds read from config.py's dataclasses. `python -m replicator.cli.config_doc`
prints it; tests/unit/test_config_doc.py fails when the committed page differs."""

from __future__ import annotations

import dataclasses
import sys

from replicator import config, config_keys
from replicator.config_keys import Key, Section

COMMAND = ".venv/bin/python -m replicator.cli.config_doc > docs/reference/configuration.md"

_INTRO = f"""\
# Configuration reference

<!-- Generated from replicator/config_keys.py and replicator/config.py: do not edit. After a
change there: {COMMAND} -->

A task is one YAML file. It is validated whole when it is loaded, and an error names the file
and the key, e.g. `task.yaml: sources[1].port: expected an integer from 1 to 65535, got 'abc'`
(list indexes count from 0; a misspelt key gets a "did you mean"). `configs/example.yaml` shows
every key in use; [Your first task](../tutorial.md) has the least a task needs. Below, each
section with its keys: `sources[]` is each item of the list `sources`.
"""


def anchor(section: Section) -> str:
    """A stable id for the section's heading: its first path, dots as dashes."""
    first = section.path.split(",")[0].strip().replace("[]", "").replace(".", "-")
    return first or "top"


def _model_defaults(section: Section) -> dict[str, object]:
    if section.model is None:
        return {}
    model = getattr(config, section.model)
    return {
        f.name: f.default
        for f in dataclasses.fields(model)
        if f.default is not dataclasses.MISSING
    }


def _literal(value: object) -> str | None:
    """A model default as the YAML that gives it; None for what a scalar cannot show."""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if isinstance(value, int | float | str):
        return f"`{value}`"
    return None


def default_text(key: Key, model_defaults: dict[str, object]) -> str:
    if key.required:
        return "required"
    if key.default is not None:
        return key.default
    if key.name in model_defaults and (text := _literal(model_defaults[key.name])) is not None:
        return text
    return "-"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_section(section: Section) -> str:
    title = f"`{section.path}`" if section.path else "The top level"
    defaults = _model_defaults(section)
    lines = [
        f"## {title} {{#{anchor(section)}}}",
        "",
        section.help,
        "",
        "| key | type | default | what it does |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{key.name}` | {_cell(key.type)} | {_cell(default_text(key, defaults))} | {_cell(key.help)} |"
        for key in section.keys
    ]
    return "\n".join(lines) + "\n"


def render() -> str:
    return "\n".join([_INTRO, *(render_section(s) for s in config_keys.SECTIONS)])


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
