"""Approvals: tool calls a policy puts before a human, waiting in NATS KV for a decision."""
