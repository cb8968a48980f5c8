"""Every REST body, NATS command, request, reply and event, as pydantic models with their subjects."""
