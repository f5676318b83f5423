"""parse_budget: every accepted form, and errors that name the value and the accepted forms."""

from __future__ import annotations

import numpy as np
import pytest

from gnn_dist.cache import format_bytes, parse_budget

TOTAL = 10_000


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, TOTAL),
        (0, 0),
        (123, 123),
        (10**13, 10**13),  # above the total: returned as parsed, the store caps it
        (np.int64(77), 77),
        (0.0, 0),
        (0.25, 2500),
        (1.0, TOTAL),
        (1 / 3, 3333),  # fractions round down
        (np.float32(0.5), 5000),
        ("123", 123),
        (" 123 ", 123),
        ("0", 0),
        ("100B", 100),
        ("4GB", 4 * 1000**3),
        ("4gb", 4 * 1000**3),
        ("512MB", 512 * 1000**2),
        ("2 kb", 2000),
        ("1TB", 1000**4),
        ("100KiB", 100 * 1024),
        ("1.5GiB", 1610612736),
        ("1.5gib", 1610612736),
        ("3MiB", 3 * 1024**2),
        ("2TiB", 2 * 1024**4),
        (".5KiB", 512),
        ("1e3KB", 10**6),
        ("1.1KB", 1100),  # exact decimal arithmetic: not 1100.0000000000002 -> 1100 by luck
        ("25%", 2500),
        ("100%", TOTAL),
        ("0%", 0),
        ("12.5 %", 1250),
    ],
)
def test_parse_budget_forms(spec, expected) -> None:
    assert parse_budget(spec, TOTAL) == expected


def test_parse_budget_none_is_the_total_even_when_zero() -> None:
    assert parse_budget(None, 0) == 0
    assert parse_budget("50%", 0) == 0


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (-1, r"cache budget -1 is negative"),
        (True, r"cache budget True is a bool"),
        (1.5, r"cache budget 1.5: a float is a fraction in \[0, 1\].*int of bytes or a size string"),
        (-0.1, r"cache budget -0.1 is not a fraction in \[0, 1\]"),
        (float("nan"), r"cache budget nan is not a fraction"),
        (float("inf"), r"cache budget inf is not a fraction"),
        ("4XB", r"cache budget '4XB' has an unknown unit 'XB' \(units: B, KB, MB, GB, TB"),
        ("4 G", r"unknown unit 'G'"),
        ("-1", r"cache budget '-1' is not a size"),
        ("", r"cache budget '' is not a size"),
        ("GB", r"cache budget 'GB' is not a size"),
        ("1.5.2GB", r"is not a size"),
        ("101%", r"cache budget '101%' is above 100%"),
        ("5GB%", r"cache budget '5GB%' is not a percentage"),
        ("%", r"is not a percentage"),
        ([1], r"cache budget \[1\] has type list"),
    ],
)
def test_parse_budget_errors(spec, match) -> None:
    with pytest.raises(ValueError, match=match) as info:
        parse_budget(spec, TOTAL)
    assert "expected None (no limit), an int of bytes" in str(info.value) or "size string" in str(info.value)


@pytest.mark.parametrize("total", [-1, 1.5, None])
def test_parse_budget_total_must_be_bytes(total) -> None:
    with pytest.raises(ValueError, match=r"total_bytes must be an int >= 0"):
        parse_budget("1GB", total)


def test_format_bytes() -> None:
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(3 * 1024**3) == "3.00 GiB"
    assert format_bytes(5 * 1024**4) == "5.00 TiB"
