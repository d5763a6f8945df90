"""The README's commands work as written, against a broker the test starts.

* Every ```python block is run, in README order, as its own interpreter process
  (`sys.executable`, the venv's, as the README says), with the address `make run` listens
  on (`127.0.0.1:9092`) replaced by the test broker's. Each must exit 0; a block followed by
  a ```text block must print exactly that text. The blocks build on each other (the
  producer's records are what the consumers print), so a test for one block first runs the
  blocks before it that have not run yet: each test also passes on its own (`-k`).
* The shell commands of the ```sh blocks (the `headwater` CLI, kcat) run the same way;
  `# prints a, b, c` is checked.
* The Spark job is fenced ```python spark: it needs a SparkSession (a JVM, ~1 min here), so
  the fast tests only check its source and sink options with the connector's own option
  parsers (what `load()` / `start()` check at planning time). `test_spark_job_runs`
  (marked slow, outside `make test`) runs it for real and reads its output topic.
* The README stays under 200 lines, and every relative link in README.md, docs/ and
  bench/README.md names a file that exists (and a heading it has, for `#anchors`).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
ADDRESS = "127.0.0.1:9092"   # what `make run` listens on; every snippet uses this string

FENCE = re.compile(r"^```([\w-]*)[ \t]*([\w-]*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    lang: str
    tag: str
    code: str
    line: int


def readme_blocks() -> list[Block]:
    text = README.read_text()
    return [Block(m.group(1), m.group(2), m.group(3), text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


def python_snippets() -> list[tuple[Block, str | None]]:
    """(block, the output it must print, or None) for every executed ```python block."""
    blocks = readme_blocks()
    out: list[tuple[Block, str | None]] = []
    for i, b in enumerate(blocks):
        if b.lang == "python" and not b.tag:
            nxt = blocks[i + 1] if i + 1 < len(blocks) else None
            out.append((b, nxt.code if nxt is not None and nxt.lang == "text" else None))
    return out


SNIPPETS = python_snippets()
_done: dict[int, subprocess.CompletedProcess[str]] = {}


def _run_python(code: str, broker: BrokerProcess, cwd: Path,
                timeout: float = 90) -> subprocess.CompletedProcess[str]:
    assert ADDRESS in code, f"a README snippet must use {ADDRESS}"
    return subprocess.run([sys.executable, "-c", code.replace(ADDRESS, broker.bootstrap)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def _run_through(index: int, broker: BrokerProcess, cwd: Path) -> None:
    """Run snippets 0..index in README order (each once per module)."""
    for i in range(index + 1):
        if i in _done:
            continue
        block, expected = SNIPPETS[i]
        proc = _run_python(block.code, broker, cwd)
        _done[i] = proc
        assert proc.returncode == 0, (
            f"README.md:{block.line} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        if expected is not None:
            assert proc.stdout == expected, (
                f"README.md:{block.line} printed\n{proc.stdout}\nexpected\n{expected}")


def test_readme_has_the_examples() -> None:
    langs = [(b.lang, b.tag) for b in readme_blocks()]
    assert len(SNIPPETS) >= 3                          # produce, consume, share consume
    assert sum(1 for _, e in SNIPPETS if e is not None) >= 2
    assert ("python", "spark") in langs
    assert any("headwater consume" in b.code for b in readme_blocks() if b.lang == "sh")


def test_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) < 200


@pytest.mark.timeout(300)
@pytest.mark.parametrize("index", range(len(SNIPPETS)),
                         ids=[f"README.md:{b.line}" for b, _ in SNIPPETS])
def test_python_snippet(index: int, broker: BrokerProcess, tmp_path: Path) -> None:
    _run_through(index, broker, tmp_path)


@pytest.mark.timeout(300)
def test_what_the_snippets_say_they_leave(broker: BrokerProcess, tmp_path: Path) -> None:
    """The consumer's comment (`headwater groups describe billing` shows lag 0) and the
    share consumer's (commit_sync accepts: nothing comes back to the group)."""
    from confluent_kafka import ShareConsumer

    _run_through(len(SNIPPETS) - 1, broker, tmp_path)
    headwater = Path(sys.executable).parent / "headwater"
    out = subprocess.run([str(headwater), "groups", "--bootstrap-server", broker.bootstrap,
                          "describe", "billing"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("billing ")]
    assert rows and all(row[5] == "0" for row in rows), out.stdout   # LAG column
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "workers"})
    c.subscribe(["orders"])
    again: list[int] = []
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        again += [m.offset() for m in c.poll(1.0) if m.error() is None]
    c.close()
    assert again == []


def _shell_commands() -> list[tuple[str, list[str] | None]]:
    """(shell command, the lines it prints or None) for each kcat or `headwater` line of
    the ```sh blocks."""
    out: list[tuple[str, list[str] | None]] = []
    for b in readme_blocks():
        if b.lang != "sh":
            continue
        for line in b.code.splitlines():
            cmd, _, comment = line.partition("#")
            if not re.search(r"(^|\|)\s*(kcat|\.venv/bin/headwater) ", cmd):
                continue
            m = re.match(r"\s*prints (.*)", comment)
            out.append((cmd.strip(), [s.strip() for s in m.group(1).split(",")] if m else None))
    return out


@pytest.mark.timeout(120)
def test_shell_commands(broker: BrokerProcess) -> None:
    commands = _shell_commands()
    assert len(commands) >= 2 and any(expected for _, expected in commands)
    for cmd, expected in commands:
        assert ADDRESS in cmd
        proc = subprocess.run(["bash", "-c", cmd.replace(ADDRESS, broker.bootstrap)],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
        if expected is not None:
            assert proc.stdout.splitlines() == expected, f"{cmd}\n{proc.stdout}"


def _spark_block() -> Block:
    (block,) = [b for b in readme_blocks() if b.lang == "python" and b.tag == "spark"]
    return block


def _chains(code: str) -> list[tuple[str, dict[str, str]]]:
    """("source" | "sink", options) of every format("headwater") chain in `code`: the
    `.option(k, v)` calls of a chain ending in load() (a source) or start() / save() (a
    sink), with literal arguments (Python joins adjacent string literals)."""
    chains: list[tuple[str, dict[str, str]]] = []
    for node in ast.walk(ast.parse(code)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("load", "start", "save")):
            continue
        opts: dict[str, str] = {}
        headwater = False
        call: ast.expr = node.func.value
        while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            args = [a.value for a in call.args if isinstance(a, ast.Constant)]
            if call.func.attr == "option" and len(args) == 2:
                opts.setdefault(str(args[0]), str(args[1]))   # the last one set wins
            headwater |= call.func.attr == "format" and args == ["headwater"]
            call = call.func.value
        if headwater:
            chains.append(("source" if node.func.attr == "load" else "sink", opts))
    return chains


def _check_options(kind: str, opts: dict[str, str]) -> None:
    from pyspark_headwater.options import check_streaming, parse_sink_options, parse_source_options
    from pyspark_headwater.share_options import is_share_source, parse_share_options

    if kind == "sink":
        parse_sink_options(opts)
    elif is_share_source(opts):
        parse_share_options(opts, streaming=True)
    else:
        check_streaming(parse_source_options(opts, streaming=True), opts)


@pytest.mark.timeout(60)
def test_spark_job_options_are_the_connectors() -> None:
    code = _spark_block().code
    chains = _chains(code)
    assert [kind for kind, _ in chains] == ["source", "sink"], chains
    for kind, opts in chains:
        assert opts["kafka.bootstrap.servers"] == ADDRESS
        _check_options(kind, opts)
    assert chains[1][1]["exactlyOnce"] == "true"


@pytest.mark.timeout(60)
def test_spark_docs_options_are_the_connectors() -> None:
    """docs/spark.md's examples too (every chain with literal options)."""
    text = (ROOT / "docs" / "spark.md").read_text()
    chains = [c for m in FENCE.finditer(text) if m.group(1) == "python"
              for c in _chains(textwrap.dedent(m.group(3)))]
    assert len(chains) >= 4
    for kind, opts in chains:
        _check_options(kind, opts)


def _read_topic(bootstrap: str, topic: str, count: int) -> list[tuple[str, str]]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"readme-check-{topic}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe([topic])
    got: list[tuple[str, str]] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = c.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append((msg.key().decode(), msg.value().decode()))
    c.close()
    return got


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_spark_job_runs(broker: BrokerProcess, tmp_path: Path) -> None:
    """The Spark snippet itself, after the producer snippet, in a fresh checkpoint."""
    from tests.spark.conftest import spark_env

    producer = next(i for i, (b, _) in enumerate(SNIPPETS) if "Producer(" in b.code)
    _run_through(producer, broker, tmp_path)
    code = _spark_block().code.replace("/tmp/headwater-readme-ckpt", str(tmp_path / "ckpt"))
    env = spark_env()
    proc = subprocess.run([sys.executable, "-c", code.replace(ADDRESS, broker.bootstrap)],
                          capture_output=True, text=True, timeout=540, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = _read_topic(broker.bootstrap, "orders-upper", 3)
    assert sorted(got) == [("order-0", "APPLES"), ("order-1", "PEARS"), ("order-2", "PLUMS")]


# ---- links ----------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def _documents() -> list[Path]:
    return [README, ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in LINK.findall(FENCE.sub("", doc.read_text())):
        if re.match(r"[a-z]+:", target):
            continue                                   # http(s), mailto
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"


def test_no_reference_outside_the_repository() -> None:
    moved = [README, ROOT / "docs" / "operations.md", ROOT / "docs" / "share-groups.md",
             ROOT / "docs" / "spark.md", ROOT / "docs" / "compatibility.md"]
    for doc in moved:
        text = doc.read_text()
        assert "../shared/" not in text and not re.search(r"\bseed \d{3}\b", text), doc


def test_readme_commands_use_the_make_run_address() -> None:
    """`make run` listens where the README's commands connect."""
    makefile = (ROOT / "Makefile").read_text()
    assert f"--listen {ADDRESS}" in makefile
