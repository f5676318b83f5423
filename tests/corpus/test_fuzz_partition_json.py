"""Fuzz ``partition.json``: mutated valid documents (wrong types, missing keys, huge or negative
integers, deep nesting, truncated text) must never make the reader raise anything but
:class:`~partitioners.errors.PartitionFormatError`, nor ``gnn-dist inspect`` report an internal
error. Regressions the fuzz found are pinned as ``@example``s."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from corpus_utils import NUM_PARTS, run_cli
from partitioners import PartitionFormatError, load_part, load_partition_meta, verify_partition
from gnn_dist_cli.command import EXIT_FAILED, EXIT_OK

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@pytest.fixture(scope="module")
def work(pristine: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working copy of the valid folder; each example rewrites its ``partition.json``."""
    out = tmp_path_factory.mktemp("fuzz-json") / "parts"
    shutil.copytree(pristine, out)
    return out


def paths_of(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indices) to a value inside ``doc``, the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths_of(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths_of(v, prefix + (i,))
    return out


def nested(depth: int, inner: Any = 0) -> Any:
    value = inner
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


BAD_VALUES = st.one_of(
    st.none(), st.booleans(),
    st.sampled_from([0, -1, 1, 2, 3, 12, 10**15, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**40]),
    st.integers(),
    st.sampled_from([0.0, 1.5, -2.5, 12.0, math.nan, math.inf, -math.inf, 1e308]),
    st.sampled_from(["", "x", "int64", "float32", "class", "part-00000/indptr.npy", "0" * 64,
                     "gnn-dist-partition"]),
    st.text(max_size=8),
    st.sampled_from([[], {}, [1, 2], [0, 4], [-1], [2**70], {"a": 1}]),
    st.integers(1, 300).map(nested),
    st.lists(st.integers(-3, 20), max_size=4),
)


@st.composite
def mutated_text(draw: st.DrawFn, base: dict) -> str:
    """A JSON document: ``base`` with 1-3 values replaced, deleted or duplicated, or its text
    truncated, or a deep nest of brackets."""
    kind = draw(st.sampled_from(["edit", "edit", "edit", "edit", "truncate", "brackets"]))
    if kind == "brackets":
        depth = draw(st.sampled_from([10, 100, 999, 1001, 5000, 100_000]))
        return "[" * depth + "]" * depth
    text = json.dumps(base)
    if kind == "truncate":
        return text[:draw(st.integers(0, len(text) - 1))]
    doc = json.loads(text)
    for _ in range(draw(st.integers(1, 3))):
        paths = paths_of(doc)
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "replace", "delete", "copy", "unknown-key"]))
        if not path:
            if op == "replace":
                doc = draw(BAD_VALUES)
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        if op == "replace":
            parent[key] = draw(BAD_VALUES)
        elif op == "delete":
            del parent[key]
        elif op == "copy":  # another subtree in its place (a file entry where a count goes, ...)
            other = draw(st.sampled_from(paths))
            value = doc
            for k in other:
                value = value[k]
            if not any(path[:i] == other for i in range(len(path) + 1)):
                parent[key] = json.loads(json.dumps(value))
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "files", "parts", "shape", "size"]))] = draw(BAD_VALUES)
        if not isinstance(doc, (dict, list)):
            break
    return json.dumps(doc)


def check_never_raw(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    """Load the folder every way; only PartitionFormatError may come out."""
    try:
        meta = load_partition_meta(folder)
    except PartitionFormatError:
        meta = None
    if meta is not None:
        for p in range(meta.num_parts):
            for verify in (True, False):
                try:
                    load_part(folder, p, verify=verify)
                except PartitionFormatError:
                    pass
    problems = verify_partition(folder)
    assert isinstance(problems, list) and all(isinstance(p, str) for p in problems)
    code, _, err = run_cli(capsys, "inspect", folder)
    assert code in (EXIT_OK, EXIT_FAILED) and "internal error" not in err, err[-2000:]
    code, out, err = run_cli(capsys, "inspect", folder, "--verify", "--json")
    assert code in (EXIT_OK, EXIT_FAILED) and "internal error" not in err, err[-2000:]
    assert json.loads(out)["ok"] == (code == EXIT_OK)


def test_fuzz_partition_json(capsys, work, pristine):
    base = json.loads((pristine / "partition.json").read_text())
    assert len(base["parts"]) == NUM_PARTS

    @SETTINGS
    @given(mutated_text(base))
    # regressions: a huge count passed the old checks and became an int64 overflow or a dtype
    # problem of indices.npy; deep nesting was a RecursionError (an "internal error")
    @example(json.dumps({**base, "parts": [{**base["parts"][0], "num_halo": 10**15}] + base["parts"][1:]}))
    @example("[" * 100_000 + "]" * 100_000)
    @example(json.dumps({**base, "quality": {"part_sizes": 5, "time_s": [1], "peak_rss_bytes": "x"}}))
    @example(json.dumps({**base, "created_by": [1]}))
    def run(text: str) -> None:
        (work / "partition.json").write_text(text)
        check_never_raw(capsys, work)

    run()
