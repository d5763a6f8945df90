"""Kafka's config providers (KIP-297, KIP-887): a broker setting's value may name a secret
kept elsewhere, `${provider:path:key}`, resolved once when the configuration is read, so
that passwords need be neither on the command line (where `ps` shows them) nor in the
properties file.

As in Kafka, providers are declared: `config.providers=file,env` and, for each,
`config.providers.<name>.class`, one of Kafka's three:
- `org.apache.kafka.common.config.provider.FileConfigProvider`: `${file:/etc/secrets.properties:key}`
  is `key` of that properties file;
- `org.apache.kafka.common.config.provider.DirectoryConfigProvider`: `${dir:/run/secrets:name}`
  is the content of file `name` in that directory;
- `org.apache.kafka.common.config.provider.EnvVarConfigProvider`: `${env:NAME}` is
  environment variable NAME (`param.allowlist.pattern` limits which).
The file and directory providers take `config.providers.<name>.param.allowed.paths`
(directories the paths must lie under). A reference to a provider not declared stays as
written, as in Kafka; one that cannot be resolved (no such file, key or variable) stops
the broker with one line naming the setting, where Kafka leaves it unresolved.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

PREFIX = "config.providers"
_REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")
_KINDS = {
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "directory",
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
}


class ProviderError(ValueError):
    """A provider declared wrongly, or a reference that cannot be resolved; the message
    names the setting and the reference, never a value."""


class _Provider:
    def __init__(self, name: str, kind: str, params: Mapping[str, str],
                 environ: Mapping[str, str],
                 parse: Callable[[str], dict[str, str]]) -> None:
        self.name, self.kind = name, kind
        self.environ = environ
        self.parse = parse
        allowed = params.get("allowed.paths", "")
        self.allowed = [Path(p.strip()).resolve() for p in allowed.split(",") if p.strip()]
        self.allowlist = re.compile(params.get("allowlist.pattern", ".*"))
        self._files: dict[str, dict[str, str]] = {}

    def get(self, path: str | None, key: str) -> str:
        if self.kind == "env":
            if not self.allowlist.fullmatch(key):
                raise ProviderError(f"variable {key} is not allowed by "
                                    f"{PREFIX}.{self.name}.param.allowlist.pattern")
            if key not in self.environ:
                raise ProviderError(f"the environment has no {key}")
            return self.environ[key]
        if not path:
            raise ProviderError(f"the {self.kind} provider needs a path")
        where = Path(path).resolve()
        if self.allowed and not any(where.is_relative_to(a) for a in self.allowed):
            raise ProviderError(f"{path} is not under {PREFIX}.{self.name}.param.allowed.paths")
        try:
            if self.kind == "directory":
                return (where / key).read_text()
            if path not in self._files:
                self._files[path] = self.parse(where.read_text())
        except OSError as exc:
            raise ProviderError(f"cannot read {exc.filename or path}: {exc.strerror}") from None
        found = self._files[path].get(key)
        if found is None:
            raise ProviderError(f"{path} has no key {key}")
        return found


def resolve(values: Mapping[str, str], parse: Callable[[str], dict[str, str]],
            environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`values` with every reference to a declared provider replaced by what it names.
    `parse` reads a properties file (the file provider's)."""
    env = os.environ if environ is None else environ
    providers: dict[str, _Provider] = {}
    for name in (n.strip() for n in values.get(PREFIX, "").split(",")):
        if not name:
            continue
        setting = f"{PREFIX}.{name}.class"
        kind = _KINDS.get(values.get(setting, ""))
        if kind is None:
            raise ProviderError(f"{setting}={values.get(setting, '')!r}: expected one of "
                                + ", ".join(_KINDS))
        prefix = f"{PREFIX}.{name}.param."
        params = {k[len(prefix):]: v for k, v in values.items() if k.startswith(prefix)}
        providers[name] = _Provider(name, kind, params, env, parse)
    if not providers:
        return dict(values)
    out: dict[str, str] = {}
    for setting, value in values.items():
        def replace(match: re.Match[str], setting: str = setting) -> str:
            provider = providers.get(match.group(1))
            if provider is None:
                return match.group(0)  # not a declared provider's: as written
            try:
                return provider.get(match.group(2), match.group(3))
            except ProviderError as exc:
                raise ProviderError(f"{setting}: {match.group(0)}: {exc}") from None
        out[setting] = value if setting.startswith(PREFIX) else _REFERENCE.sub(replace, value)
    return out
