"""The configuration reference (docs/configuration.md), rendered from the registry."""

from __future__ import annotations

from collections.abc import Iterable

from . import SETTINGS
from .model import Scope, Setting

HEADER = """# Configuration reference

Generated from the configuration registry (`headwater/config_registry/`) by
`python -m headwater.config_registry --markdown > docs/configuration.md`; do not edit by
hand (a unit test fails when this file is out of date). How to configure a broker:
[operations.md](operations.md#configuration). "Dynamic" keys may be changed at runtime
with AlterConfigs (`kafka-configs --alter`); a topic key's default is its broker key's
value (a group key's, its `group.*` broker key's). Sensitive keys are described without
their value.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default(setting: Setting) -> str:
    if setting.synonym is not None:
        return f"`{setting.synonym}`"
    if setting.default is None:
        return "(none)"
    return f"`{setting.default}`" if setting.default else '`""`'


def _doc(setting: Setting) -> str:
    notes = []
    if setting.valid:
        notes.append("one of " + ", ".join(setting.valid))
    if setting.at_least is not None or setting.at_most is not None:
        low = "" if setting.at_least is None else str(setting.at_least)
        high = "" if setting.at_most is None else str(setting.at_most)
        notes.append(f"range [{low}, {high}]" if high else f"at least {low}")
    if setting.is_sensitive:
        notes.append("sensitive")
    return setting.doc + (f" ({'; '.join(notes)})" if notes else "")


def table(settings: Iterable[Setting]) -> list[str]:
    lines = ["| Key | Type | Default | Dynamic | Description |",
             "| --- | --- | --- | --- | --- |"]
    for s in sorted(settings, key=lambda s: s.name):
        lines.append(f"| `{s.name}` | {s.type.value} | {_cell(_default(s))} | "
                     f"{'yes' if s.dynamic else 'no'} | {_cell(_doc(s))} |")
    return lines


SECTIONS = (
    ("Broker", "Broker keys (the BROKER config resource; `server.properties`, `--override`).",
     lambda s: s.is_broker),
    ("Topic", "Topic keys (the TOPIC config resource); each defaults to its broker key.",
     lambda s: s.is_topic),
    ("Group", "Group keys (the GROUP config resource, `kafka-configs --entity-type groups`); "
     "one with a broker key as default must lie within that key's `group.<kind>.min.*` / "
     "`group.<kind>.max.*`.", lambda s: s.scope is Scope.GROUP),
    ("Client metrics", "Client-metrics subscription keys (the CLIENT_METRICS config "
     "resource, KIP-714).", lambda s: s.scope is Scope.CLIENT_METRICS),
)


def render(settings: Iterable[Setting] = SETTINGS) -> str:
    """The whole reference page."""
    settings = tuple(settings)
    out = [HEADER]
    for title, intro, wanted in SECTIONS:
        out += [f"## {title}", "", intro, "", *table(s for s in settings if wanted(s)), ""]
    return "\n".join(out)
