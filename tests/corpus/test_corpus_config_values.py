"""Values that pass a type check and fail in the ranks are refused up front, one line each
(issue 33): a seed past int64, widths and depths nothing could allocate, timeouts the backends'
clocks overflow (1e10, 1e300, inf, nan; gnn_dist.predict's too), a TOML file nested 50,000 deep
or larger than 1 MiB (/dev/zero), and ``--config <(...)`` (a pipe) works through gnn-dist train's
launcher, which copies it once for every process."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gnn_dist.config_cli import UsageError, parse_run_config


@pytest.mark.parametrize("flags, pattern", [
    (["--seed", str(2**64)], r"--seed: 18446744073709551616 is not valid: expected an integer in \[0, 9223372036854775807\]"),
    (["--seed", "-1"], r"--seed: -1 is not valid"),
    (["--hidden", str(2**63 - 1)], r"--hidden: 9223372036854775807 is not valid: expected an integer in \[1, 1048576\]"),
    (["--layers", "100000000"], r"--layers: 100000000 is not valid: expected an integer in \[1, 4096\]"),
    (["--model", "gat", "--heads", "100000"], r"--heads: 100000 is not valid: expected an integer in \[1, 1024\]"),
    (["--timeout", "1e10"], r"--timeout: 10000000000\.0 is not valid: expected a positive number of seconds, at most 604800"),
    (["--timeout", "1e300"], r"--timeout: 1e\+300 is not valid"),
    (["--timeout", "inf"], r"--timeout: inf is not valid"),
    (["--timeout", "nan"], r"--timeout: nan is not valid"),
])
def test_values_the_ranks_would_fail_on_are_refused(flags, pattern):
    with pytest.raises(UsageError, match=pattern) as info:
        parse_run_config(["--data", "d", *flags])
    assert len(str(info.value).splitlines()) == 1


def test_the_largest_accepted_values_still_parse():
    config, _ = parse_run_config(["--data", "d", "--seed", str(2**63 - 1), "--layers", "4096", "--timeout", "604800"])
    assert (config.model.seed, config.model.layers, config.distributed.timeout) == (2**63 - 1, 4096, 604800.0)


@pytest.mark.parametrize("timeout", ["inf", "1e300", "nan", "0"])
def test_predict_refuses_a_timeout_it_cannot_keep(timeout):
    from gnn_dist.predict import UsageError as PredictUsage, _parse

    with pytest.raises(PredictUsage, match=rf"--timeout {re.escape(str(float(timeout)))}: expected a positive number "
                                           rf"of seconds, at most 604800"):
        _parse(["--data", "d", "--model-file", "m", "--out", "o.npz", "--timeout", timeout])


def test_a_toml_nested_too_deep_is_one_line(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(UsageError, match=r"deep\.toml: not valid TOML \(nested too deep"):
        parse_run_config(["--data", "d", "--config", str(deep)])


def test_a_config_file_is_read_bounded(tmp_path):
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * (1 << 20) + "\n")
    with pytest.raises(UsageError, match=r"--config .*big\.toml: larger than 1 MiB"):
        parse_run_config(["--data", "d", "--config", str(big)])
    with pytest.raises(UsageError, match=r"--config /dev/zero: larger than 1 MiB"):
        parse_run_config(["--data", "d", "--config", "/dev/zero"])


def test_a_piped_config_is_copied_once_for_every_process(tmp_path):
    from gnn_dist_cli.launch_verbs import _readable_config

    read, write = os.pipe()
    os.write(write, b'epochs = 3\n[data]\ndata = "parts/x"\n')
    os.close(write)
    try:
        with _readable_config(["--config", f"/dev/fd/{read}", "--epochs", "2"]) as rest:
            copy = Path(rest[1])
            assert rest[0] == "--config" and copy.is_file() and rest[2:] == ["--epochs", "2"]
            assert copy.read_text() == 'epochs = 3\n[data]\ndata = "parts/x"\n'
            config, _ = parse_run_config(rest)   # what the pre-launch check and each rank parse
            assert (config.epochs, config.data.data) == (2, "parts/x")
        assert not copy.exists()   # removed when the job ends
    finally:
        os.close(read)
