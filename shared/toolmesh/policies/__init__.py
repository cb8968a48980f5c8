"""Policies on tool calls: CEL expressions over a call's attributes (``language``), their
combination into one decision (``decisions``) and the removal of result fields (``result_fields``)."""
