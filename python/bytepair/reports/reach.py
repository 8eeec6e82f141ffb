"""Which tokens the merges can build from their own bytes.

A token is *reachable* when byte-level BPE over its own bytes ends in that one token.
An unreachable token is never produced by encoding any text: inside a longer text the
merges within a final token's span are exactly the merges BPE makes on that span alone
(a merge across its edge would have joined it to a neighbour).

Running BPE on every token is slow in Python, so this walks the merge tree instead
(the check of GitHub's ``bpe`` crate, ``is_valid_token_pair``): a merge ``(l, r)`` of
rank ``n`` builds its token exactly when ``l`` and ``r`` are reachable and, walking
down the right edge of ``l`` and the left edge of ``r`` (undoing the later-made part
first), no pair across the seam would have merged before the parts on either side
were made. Each token costs the depth of its tree.

>>> merges = [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")]
>>> unreachable_merges(merges)  # "abc": b+c merges first, so a+bc, never ab+c
[2]
"""

from __future__ import annotations


def unreachable_merges(merges: list[tuple[bytes, bytes]]) -> list[int]:
    """The indexes of merges whose token BPE never builds from the token's own bytes.

    Where several merges make the same bytes, the later ones never apply (the first
    already made that token) and count as unreachable here; a caller reports them as
    duplicates.
    """
    # Nodes: 0-255 the bytes, 256 + n merge n, so a node's number orders it by rank.
    node_of: dict[bytes, int] = {bytes([b]): b for b in range(256)}
    split: list[tuple[int, int]] = [(b, b) for b in range(256)]
    pair_node: dict[tuple[int, int], int] = {}
    dead: set[int] = set()
    for n, (a, b) in enumerate(merges):
        node = 256 + n
        left, right = node_of[a], node_of[b]
        split.append((left, right))
        if a + b in node_of or (left, right) in pair_node:
            dead.add(node)
            continue
        node_of[a + b] = node
        pair_node[(left, right)] = node
    reachable = [True] * 256 + [False] * len(merges)
    for node in range(256, 256 + len(merges)):
        left, right = split[node]
        reachable[node] = (
            node not in dead
            and reachable[left]
            and reachable[right]
            and _seam_holds(pair_node, split, left, right, node)
        )
    return [node - 256 for node in range(256, len(reachable)) if not reachable[node]]


def _seam_holds(pair_node, split, left: int, right: int, limit: int) -> bool:
    """True if no pair across the seam between ``left`` and ``right`` merges before
    both are made (and before ``limit``, the merge that joins them)."""
    # Each step undoes one merge on one side, so the walk ends within both depths.
    for _ in range(2 * len(split)):
        across = pair_node.get((left, right))
        if across is not None and across < limit:
            return False
        if left > right:
            # left was made last: before it, the seam saw its right part.
            limit = left
            left = split[left][1]
            if left == limit:  # a byte: nothing left to undo on this side
                limit = right + 1
                right = split[right][0]
                if right + 1 == limit:
                    return True
        else:
            limit = right + 1
            right = split[right][0]
            if right + 1 == limit:
                limit = left
                left = split[left][1]
                if left == limit:
                    return True
    raise AssertionError("the merge tree walk did not end")  # merges refer to earlier nodes
