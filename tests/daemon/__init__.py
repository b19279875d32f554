"""Tests that run a live replication daemon on the sandbox's servers."""
