"""What every role runs on: the bus, the store, settings, telemetry, supervision, processes, logs."""
