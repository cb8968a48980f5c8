"""The projector role: applies events to the Postgres read model."""
