"""Tests against real MariaDB servers (the sandbox), with no replication daemon running."""
