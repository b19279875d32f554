"""Tests that run Spark jobs: backfill, resync and verify on a SparkSession or a Spark cluster."""
