"""The import graph of ``refnorm`` has no circles (issue 37): as an import-graph tool draws it (grimp,
the library import-linter is built on), function-level (lazy) imports included, every module of
``refnorm`` reaches no module that reaches it back."""
import pytest

grimp = pytest.importorskip("grimp", reason="grimp (the `test` extra) draws the import graph")


def strongly_connected(adjacency: dict) -> list:
    """The strongly connected components of a directed graph ({node: successors}) with more than one
    node or a self-loop, each a sorted list (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in sorted(adjacency):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(adjacency[root])))]
        while work:
            v, successors = work[-1]
            for w in successors:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(adjacency[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1 or v in adjacency[v]:
                        found.append(sorted(component))
    return found


def one_cycle(adjacency: dict, component: list) -> list:
    """A shortest cycle through the first module of ``component`` (breadth-first within it), as a
    list of modules whose last imports the first."""
    start, inside = component[0], set(component)
    parent, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(adjacency[v]):
                if w == start:
                    path = [v]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return path[::-1]
                if w in inside and w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{component} is not strongly connected")


def describe(graph, cycle: list) -> str:
    lines = []
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        where = ", ".join(f"line {d['line_number']}: {d['line_contents']}"
                          for d in graph.get_import_details(importer=a, imported=b))
        lines.append(f"  {a} -> {b}   ({where})")
    return "\n".join(lines)


def import_graph():
    graph = grimp.build_graph("refnorm", cache_dir=None)
    return graph, {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def test_the_cycle_finder_finds_cycles_and_only_cycles():
    adjacency = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert strongly_connected(adjacency) == [["a", "b", "c"], ["e"]]
    assert one_cycle(adjacency, ["a", "b", "c"]) == ["a", "b", "c"]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_the_graph_holds_refnorms_modules_and_their_lazy_imports():
    graph, adjacency = import_graph()
    assert {"refnorm.check.core", "refnorm.check.diagnosis", "refnorm.check.judge",
            "refnorm.specs.add_norm", "refnorm.norms.add_norm"} <= graph.modules
    # a function-level import is an edge: the fast path reaches its specification inside _forward
    assert "refnorm.specs.add_norm" in adjacency["refnorm.norms.add_norm"]


def test_no_import_circles():
    graph, adjacency = import_graph()
    components = strongly_connected(adjacency)
    report = "\n".join(f"circle through {len(c)} modules {c}:\n{describe(graph, one_cycle(adjacency, c))}"
                       for c in components)
    print(report)
    assert not components, f"import circles in refnorm:\n{report}"
