"""Everything that talks to servers: sandbox, workers, coordinator, applier, CLI."""
