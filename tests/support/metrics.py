"""A broker's Prometheus endpoint (`--metrics-listen`) as the tests read it: one broker's
exposition, or a cluster's (`--storage=cluster`), each broker's scraped and the series
added up, as a dashboard over all three would show them."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Iterator

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families


def metrics_port(extra: Iterable[str]) -> int | None:
    """The port of a broker's `--metrics-listen HOST:PORT` option, if it has one."""
    args = list(extra)
    for i, arg in enumerate(args[:-1]):
        if arg == "--metrics-listen":
            return int(args[i + 1].rpartition(":")[2])
    return None


def scrape(port: int, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
        return r.read().decode()


class _Merged:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def merge(texts: Iterable[str]) -> str:
    """Several brokers' expositions as one, in the format each has: a series reported by
    several brokers is summed (a counter's total over the cluster; a broker's per-kind
    count), except a `_max` one, which is their maximum; a series of one partition or
    one group, which the broker serving it reports, keeps that broker's value."""
    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            if family.name not in families:
                families[family.name] = Metric(family.name, family.documentation, family.type)
                values[family.name] = {}
            series = values[family.name]
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                if key not in series:
                    series[key] = sample.value
                elif "_max" in sample.name:
                    series[key] = max(series[key], sample.value)
                else:
                    series[key] += sample.value
    for name, family in families.items():
        for (sample_name, labels), value in values[name].items():
            family.add_sample(sample_name, dict(labels), value)
    return generate_latest(_Merged(list(families.values()))).decode()
