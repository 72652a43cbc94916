"""BusStats percentiles: linear interpolation between ranks, checked against numpy's definition."""
import math

import numpy as np
import pytest

from hil.runtime.bus.stats import BusStats


def stats_of(latencies_s):
    stats = BusStats()
    stats.latencies_s.extend(latencies_s)
    return stats


def test_percentiles_interpolate_between_ranks():
    assert stats_of([0.001, 0.003]).latency_percentile_s(50) == pytest.approx(0.002)
    hundred = [k / 1000 for k in range(1, 101)]
    assert stats_of(hundred).latency_percentile_s(99) == pytest.approx(0.09901)
    assert stats_of(hundred).latency_percentile_s(100) == pytest.approx(0.1)
    assert stats_of(hundred).latency_percentile_s(0) == pytest.approx(0.001)
    assert stats_of([0.004]).latency_percentile_s(99) == pytest.approx(0.004)
    assert math.isnan(BusStats().latency_percentile_s(50))


def test_percentiles_agree_with_numpy():
    rng = np.random.default_rng(7)
    for n in (2, 3, 10, 97, 1000):
        sample = rng.exponential(0.002, n)
        for q in (1, 50, 90, 99):
            assert stats_of(sample).latency_percentile_s(q) == pytest.approx(float(np.percentile(sample, q)))
    d = stats_of([0.001, 0.003]).as_dict()
    assert d["latency_p50_ms"] == pytest.approx(2.0) and d["latency_max_ms"] == pytest.approx(3.0)
