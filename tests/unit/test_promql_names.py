"""The metric names read out of PromQL (tests/promql_names.py), which the tests of the alert
rules and the dashboard compare with what a daemon exports: function and aggregation names,
labels, `by (...)` lists, durations, strings and Grafana variables are no metric."""

from __future__ import annotations

import pytest

from tests.promql_names import PromQLError, exported_names, metric_names, tokens


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        ('shardmerge_paused_shards{target="db.orders"} > 0', {"shardmerge_paused_shards"}),
        # an aggregation before its `by`, its labels, a function, a range with a Grafana variable
        (
            "sum by (source, table) (rate(shardmerge_rows_applied_total{job=~\"$job\"}[$__rate_interval]))",
            {"shardmerge_rows_applied_total"},
        ),
        ("sum(rate(a_total[5m])) by (le)", {"a_total"}),
        ("sum without (instance) (b)", {"b"}),
        (
            "histogram_quantile(0.99, sum by (le) (rate(shardmerge_batch_seconds_bucket[1m30s])))",
            {"shardmerge_batch_seconds_bucket"},
        ),
        # binary operators with vector matching: on, ignoring, group_left's labels
        ("a / on (shard) group_left (task) b", {"a", "b"}),
        ("a * ignoring(role) group_right c", {"a", "c"}),
        ("x > bool 1 and y unless z or w", {"x", "y", "z", "w"}),
        (
            "count by (task) (r) unless on (task) count by (task) (r{role=\"active\"}) or absent(r)",
            {"r"},
        ),
        # offsets, subqueries, @, numbers of every form
        ("a offset 5m + b offset -1h30m", {"a", "b"}),
        ("max_over_time(deriv(c[5m])[30m:1m]) @ start()", {"c"}),
        ("d > 1e3 and e < 0x1F and f != Inf and g == NaN and h > .5", {"d", "e", "f", "g", "h"}),
        ("rate(i[500ms])", {"i"}),
        # strings: their words are no metrics, whatever their quotes
        ('label_replace(j, "dst", "by $1", "src", "(.*)")', {"j"}),
        ("count_values('k8s', l) + on() vector(0) + time()", {"l"}),
        ("m{a=`sum(x)`}", {"m"}),
        # a selector that names its metric as a label; one by regular expression names none
        ('{__name__="n", job="x"}', {"n"}),
        ('{__name__=~"o.*"}', set()),
        # colons in recorded names; a comment
        ("job:p:rate5m # not q", {"job:p:rate5m"}),
        ("vector(1)", set()),
    ],
)
def test_the_metric_names_of_an_expression(expr, names):
    assert metric_names(expr) == names


def test_what_it_cannot_read_it_says_where():
    with pytest.raises(PromQLError, match=r"cannot read PromQL at 2: '\?\?"):
        metric_names("a ?? b")
    with pytest.raises(PromQLError, match="unclosed"):
        metric_names("sum by (a (b)")


def test_durations_are_one_token():
    assert tokens("x[1h30m] offset 500ms") == [
        ("name", "x"), ("open", "["), ("number", "1h30m"), ("close", "]"), ("name", "offset"), ("number", "500ms"),
    ]


def test_the_names_a_daemons_metrics_export():
    """From what prometheus_client writes for the daemon's own metrics (no sample needed)."""
    from replicator.metrics import Metrics

    metrics = Metrics()
    metrics.batch_seconds.observe(0.2)
    names = exported_names(metrics.render())
    assert {
        "shardmerge_batch_seconds_bucket",
        "shardmerge_batch_seconds_sum",
        "shardmerge_batch_seconds_count",
        "shardmerge_rows_applied_total",  # a counter, no row applied yet
        "shardmerge_source_lag_seconds",  # a gauge without samples
        "shardmerge_daemon_role",
    } <= names
    assert not {"shardmerge_batch_seconds", "shardmerge_rows_applied", "shardmerge_rows_applied_total_total"} & names


def test_the_names_of_families_typed_or_not():
    text = (
        "# HELP a_total A counter\n# TYPE a_total counter\na_total 1\n"
        "# TYPE b counter\n"  # (a writer that leaves `_total` out of the family)
        "# TYPE c summary\n# HELP d no type given\nd 4\n"
    )
    assert exported_names(text) == {"a_total", "b_total", "c", "c_sum", "c_count", "d"}
