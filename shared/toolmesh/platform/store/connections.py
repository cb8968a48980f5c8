"""What the store's functions run their SQL on: a connection (plain or lent by the pool), or the pool."""

from __future__ import annotations

import asyncpg
from asyncpg.pool import PoolConnectionProxy

Conn = asyncpg.Connection | PoolConnectionProxy
"""One connection: what a transaction runs on."""
Db = asyncpg.Pool | Conn
"""A connection, or the pool (each statement on a connection of its own)."""
