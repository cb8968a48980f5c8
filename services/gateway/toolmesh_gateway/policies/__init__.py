"""Policies on tool calls: CEL expressions over a call's attributes (``language``), their combination
into one decision (``decisions``), the removal of result fields (``result_fields``), the rules this
gateway checks (``book``), the check every call passes (``checks``) and their management (``service``,
``reads``)."""
