"""Pure tests: no database, no Spark, no daemon process."""
