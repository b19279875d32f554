"""The configuration reference (docs/reference/configuration.md) is rendered from the config model
(replicator/config_keys.py, replicator/config.py): the committed page must be the renderer's output,
every key the parser takes must be in it, and the defaults it shows must be what a config without
those keys gets."""

from __future__ import annotations

import dataclasses

import pytest

from replicator import config, config_keys
from replicator.cli import config_doc
from tests.replication import REPO

PAGE = REPO / "docs" / "reference" / "configuration.md"
MINIMAL = {
    "task": "t",
    "sources": [{"id": "s1", "host": "h", "user": "u", "server_id": 9001}],
    "target": {"host": "h", "user": "u", "flavor": "mariadb"},
    "routes": [{"schema": "db_*", "table": "t_*", "target": "db.t"}],
}


def test_the_committed_page_is_the_renderers_output():
    assert PAGE.read_text(encoding="utf-8") == config_doc.render(), (
        f"{PAGE.relative_to(REPO)} differs from what the config model renders; write it again with:\n"
        f"  {config_doc.COMMAND}"
    )


def test_every_key_of_every_section_is_on_the_page():
    page = PAGE.read_text(encoding="utf-8")
    missing = [
        f"{section.path or '(top)'}: {key.name}"
        for section in config_keys.SECTIONS
        for key in section.keys
        if f"| `{key.name}` |" not in config_doc.render_section(section)
    ]
    assert not missing
    for section in config_keys.SECTIONS:
        assert f"{{#{config_doc.anchor(section)}}}" in page, section.path


@pytest.mark.parametrize(
    ("section", "got"),
    [
        (config_keys.OPTIONS, lambda c: c.options),
        (config_keys.VALIDATOR, lambda c: c.validator),
        (config_keys.ADMIN, lambda c: c.admin),
        (config_keys.TARGET, lambda c: c.target),
        (config_keys.TOP, lambda c: c),
    ],
    ids=lambda v: getattr(v, "path", "") or "top",
)
def test_the_defaults_shown_are_what_a_config_without_the_key_gets(section, got):
    """A default the page takes from the model must be the value the parser gives an absent key."""
    loaded = got(config.parse_config(MINIMAL, environ={}))
    model = getattr(config, section.model)
    shown = 0
    for key in section.keys:
        field = next((f for f in dataclasses.fields(model) if f.name == key.name), None)
        if field is None or field.default is dataclasses.MISSING or key.default is not None:
            continue
        text = config_doc.default_text(key, {field.name: field.default})
        if text == "-":
            continue
        assert text == config_doc.default_text(key, {key.name: getattr(loaded, key.name)}), key.name
        shown += 1
    assert shown, f"{section.path}: no default taken from the model"


def test_a_key_the_reference_does_not_list_is_refused():
    """The parser's field checks read the reference's keys: a key missing there is no key."""
    bad = {**MINIMAL, "options": {"batch_size": 10, "batch_sise": 10}}
    with pytest.raises(config.ConfigError, match=r"options.*batch_sise"):
        config.parse_config(bad, environ={})
    for section in config_keys.SECTIONS:
        assert len(set(section.names)) == len(section.names), f"{section.path}: a key listed twice"
