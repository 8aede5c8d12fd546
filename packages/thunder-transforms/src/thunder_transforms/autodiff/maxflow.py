"""Maximum flow / minimum cut on small directed graphs (Dinic's algorithm), for rematerialization.

Integer capacities; ``INF`` marks an edge that must never be cut. Nodes are dense integers.
"""

from __future__ import annotations

from collections import deque

__all__ = ["INF", "FlowGraph"]

INF = 1 << 62


class FlowGraph:
    """A flow network: ``add_node()``, ``add_edge(u, v, capacity)``, then ``max_flow(s, t)`` and
    ``sink_side(t)`` (the sink side of the minimum cut closest to the sink)."""

    __slots__ = ("adj", "cap", "to")

    def __init__(self) -> None:
        self.adj: list[list[int]] = []  # node -> indices of its edges (forward and residual)
        self.to: list[int] = []  # edge -> head; edge e ^ 1 is its reverse
        self.cap: list[int] = []  # edge -> residual capacity

    def add_node(self) -> int:
        self.adj.append([])
        return len(self.adj) - 1

    def add_edge(self, u: int, v: int, capacity: int) -> None:
        self.adj[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(capacity)
        self.adj[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(0)

    def _levels(self, s: int, t: int) -> list[int] | None:
        level = [-1] * len(self.adj)
        level[s] = 0
        queue = deque([s])
        to, cap = self.to, self.cap
        while queue:
            u = queue.popleft()
            for e in self.adj[u]:
                v = to[e]
                if cap[e] > 0 and level[v] < 0:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level if level[t] >= 0 else None

    def max_flow(self, s: int, t: int) -> int:
        """Pushes a maximum flow from ``s`` to ``t`` (leaving the residual capacities) and returns
        its value. Blocking flows are found with an iterative DFS (no recursion limit)."""
        total = 0
        to, cap, adj = self.to, self.cap, self.adj
        while (level := self._levels(s, t)) is not None:
            it = [0] * len(adj)
            path: list[int] = []  # edges from s to the current node
            u = s
            while True:
                if u == t:
                    pushed = min(cap[e] for e in path)
                    total += pushed
                    cut_at = len(path)
                    for i, e in enumerate(path):
                        cap[e] -= pushed
                        cap[e ^ 1] += pushed
                        if cap[e] == 0 and i < cut_at:
                            cut_at = i
                    del path[cut_at:]
                    u = to[path[-1]] if path else s
                    continue
                edges = adj[u]
                advanced = False
                while it[u] < len(edges):
                    e = edges[it[u]]
                    v = to[e]
                    if cap[e] > 0 and level[v] == level[u] + 1:
                        path.append(e)
                        u = v
                        advanced = True
                        break
                    it[u] += 1
                if advanced:
                    continue
                if u == s:
                    break
                level[u] = -1  # dead end for this phase
                e = path.pop()
                u = to[e ^ 1]
                it[u] += 1
        return total

    def sink_side(self, t: int) -> set[int]:
        """After ``max_flow``: the nodes that can still reach ``t`` in the residual graph."""
        seen = {t}
        queue = deque([t])
        to, cap = self.to, self.cap
        while queue:
            v = queue.popleft()
            for e in self.adj[v]:
                u = to[e]  # the reverse of e runs u -> v
                if cap[e ^ 1] > 0 and u not in seen:
                    seen.add(u)
                    queue.append(u)
        return seen
