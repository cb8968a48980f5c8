"""A serving process's collector: garbage from startup is freed, what lives on is frozen, young
collections are rarer. Run in a fresh interpreter so the test session's collector stays untouched."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json, weakref
from toolmesh_cli.gc_tuning import YOUNG_THRESHOLD, tune_for_serving

class Node:
    pass

gc.disable()  # only tune_for_serving may collect
cycle = Node(); cycle.peer = Node(); cycle.peer.peer = cycle
dropped = weakref.ref(cycle)
del cycle
kept = Node()
tune_for_serving()
print(json.dumps({
    "cycle_freed": dropped() is None,
    "kept_frozen": gc.get_freeze_count() > 0 and not any(o is kept for o in gc.get_objects()),
    "young": gc.get_threshold()[0] == YOUNG_THRESHOLD,
}))
"""


def test_tuning_frees_startup_garbage_and_freezes_the_rest() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(result.stdout) == {"cycle_freed": True, "kept_frozen": True, "young": True}
