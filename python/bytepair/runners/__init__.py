"""Where the work runs: locally (threads in this process, the default) or on a Ray
cluster (``engine="ray"``) — training's counting, and encoding shard documents.

Counting is a map-reduce: pre-token counts from separate parts of a corpus add up, so
the parts can be counted anywhere and combined; the merge loop then runs once, on the
combined counts, in this process. Parts are cut only where pre-tokenization cannot
change (the same safe cut points the local reader uses), so the merges are identical
whatever the engine and the number of parts.

- :mod:`bytepair.runners.plan`: cutting inputs into parts (files, byte ranges);
- :mod:`bytepair.runners.ray`: counting the parts as Ray tasks, a tree reduction;
- :mod:`bytepair.runners.feed`: the loop that feeds a ``ShardWriter`` encoded batches,
  for :mod:`bytepair.runners.local` (this process) and
  :mod:`bytepair.runners.ray_encode` (Ray tasks): the writer imports neither.
"""

ENGINES = ("local", "ray")


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; engines: {', '.join(ENGINES)}")
