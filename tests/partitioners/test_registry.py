"""The partition-method registry: register_method, METHODS, and what assign_parts checks."""

from __future__ import annotations

import numpy as np
import pytest

from partitioners import Graph
from partitioners import methods
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE, build_parser, main
from partitioners.methods import assign_parts, get_method, register_method


pytestmark = pytest.mark.usefixtures("clean_registry")


def path_graph(n: int = 12) -> Graph:
    return Graph.from_edges(np.arange(n - 1), np.arange(1, n), n, symmetrize=True)


def test_builtins_are_registered_in_order():
    assert methods.METHODS == ("metis", "random", "ldg", "fennel")
    assert get_method("metis").options == ("imbalance", "part_weights")
    assert get_method("random").options == ("part_weights",)
    assert get_method("ldg").options == ("imbalance", "progress", "part_weights")
    assert all(get_method(m).memory is not None for m in methods.METHODS)


def test_a_registered_method_is_used_everywhere(tmp_path):
    calls = []

    @register_method("halves", options=("progress",))
    def halves(graph, num_parts, *, seed, balance, progress):
        """Low ids to part 0, high ids to the last part."""
        calls.append((num_parts, seed, balance, progress))
        return (np.arange(graph.num_nodes) * num_parts // graph.num_nodes).astype(np.int64)

    assert halves.__name__ == "halves"  # the decorator returns the function
    assert methods.METHODS[-1] == "halves"
    assert get_method("halves").description == "Low ids to part 0, high ids to the last part."
    a = assign_parts(path_graph(), 2, "halves", seed=4, balance="nodes")
    assert a.dtype == np.int32 and a.tolist() == [0] * 6 + [1] * 6
    assert calls == [(2, 4, ("nodes",), False)]
    # the --method choices are read when a parser is built
    sub = build_parser()._subparsers._group_actions[0].choices["partition"]
    method_action = next(a for a in sub._actions if a.dest == "method")
    assert "halves" in method_action.choices
    out = tmp_path / "o"
    assert main(["partition", "--dataset", "sbm-tiny", "--parts", "3", "--method", "halves",
                 "--out", str(out), "--no-progress"]) == EXIT_OK
    from partitioners import load_partition_meta, verify_partition

    assert load_partition_meta(out).method == "halves" and verify_partition(out) == []


def test_plain_call_registration_and_replace():
    def first(graph, num_parts, *, seed, balance):
        return np.zeros(graph.num_nodes, np.int32)

    assert register_method("zeros", first, options=()) is first
    with pytest.raises(ValueError, match=r"partition method 'zeros' is already registered "
                                         r"\(test_registry\); pick another name or pass replace=True"):
        register_method("zeros", first, options=())
    register_method("zeros", first, options=(), replace=True, description="all in part 0")
    assert get_method("zeros").description == "all in part 0"
    with pytest.raises(ValueError, match="already registered"):
        register_method("metis", first)


@pytest.mark.parametrize("name", ["", "has space", "-dash-first", "a/b", 7, None])
def test_bad_names_are_refused(name):
    with pytest.raises(ValueError, match=r"method name .* is invalid: use letters, digits and _\.-"):
        register_method(name, lambda *a, **k: None)


def test_bad_registrations_are_refused():
    with pytest.raises(ValueError, match=r"register_method\('x'\): unknown option\(s\) \['seed'\]; "
                                         r"a method may take imbalance, progress"):
        register_method("x", lambda *a, **k: None, options=("seed",))
    with pytest.raises(TypeError, match=r"register_method\('x'\): the method must be callable, got 3"):
        register_method("x", 3)
    with pytest.raises(TypeError, match=r"memory must be callable"):
        register_method("x", lambda *a, **k: None, memory=5)
    assert "x" not in methods.METHODS


@pytest.mark.parametrize("result, pattern", [
    (np.zeros(5, np.int32), r"assignment has shape \(5,\) but the graph has 12 nodes"),
    (np.full(12, 3), r"assignment\[0\] = 3 is out of range: part ids must be in \[0, num_parts = 3\)"),
    (np.zeros(12, np.float32), r"assignment must hold integer part ids, got dtype float32"),
])
def test_an_invalid_assignment_names_the_method(result, pattern):
    register_method("broken", lambda graph, num_parts, *, seed, balance: result, options=())
    with pytest.raises(ValueError, match=r"partition method 'broken' \(test_registry\..*\) returned "
                                         r"an invalid assignment: " + pattern):
        assign_parts(path_graph(), 3, "broken")


def test_unknown_method_lists_the_registered_ones(capsys, tmp_path):
    register_method("mine", lambda graph, num_parts, *, seed, balance: np.zeros(graph.num_nodes, int),
                    options=())
    with pytest.raises(ValueError, match=r"unknown partition method 'nope'; valid methods are "
                                         r"metis, random, ldg, fennel, mine"):
        assign_parts(path_graph(), 2, "nope")
    assert main(["partition", "--dataset", "sbm-tiny", "--parts", "2", "--method", "nope",
                 "--out", str(tmp_path / "o")]) == EXIT_USAGE
    assert "invalid choice: 'nope' (choose from" in capsys.readouterr().err


def test_a_method_error_is_a_usage_error(capsys, tmp_path):
    def picky(graph, num_parts, *, seed, balance):
        raise ValueError("method 'picky' balances nodes only")

    register_method("picky", picky, options=())
    code = main(["partition", "--dataset", "sbm-tiny", "--parts", "2", "--method", "picky",
                 "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and "[gnn-dist] error: method 'picky' balances nodes only" in err
    assert not (tmp_path / "o").exists()
