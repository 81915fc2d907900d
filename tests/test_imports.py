"""The import graph of ``refnorm`` as an import-graph tool draws it (grimp, the library import-linter is
built on), function-level (lazy) imports included (issue 37): no circles (no module reaches a module that
reaches it back), and each layer imports only the layers beneath it (LAYERS)."""
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


# top to bottom, as the developers' guide draws them: the user-facing entry points; the checker (bounds,
# comparison, verdicts, reports, diagnosis, backend adapters, runners); golden cases and recipes,
# derivations, pitfall variants; the registry (evaluate); the reference core; its shared definitions.
# The package itself (refnorm/__init__.py: evaluate and the names users import) is the container, unlayered.
LAYERS = (("cli", "pytest_plugin", "testing", "strategies"), ("check",),
          ("golden", "derivations", "pitfalls", "fold"), ("registry",), ("norms", "specs"),
          ("spec", "errors", "_memo"))


def illegal_imports(graph) -> list:
    """Every import of a higher layer by a lower one (LAYERS), as "lower -> higher: a -> ... -> b"."""
    layers = tuple(grimp.Layer(*names, independent=False) for names in LAYERS)
    out = []
    for d in graph.find_illegal_dependencies_for_layers(layers=layers, containers={"refnorm"}):
        for r in sorted(d.routes, key=repr):
            chain = [" | ".join(sorted(r.heads)), *r.middle, " | ".join(sorted(r.tails))]
            out.append(f"{d.importer} -> {d.imported}: {' -> '.join(chain)}")
    return sorted(out)


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


def test_each_layer_imports_only_the_layers_beneath():
    graph, _ = import_graph()
    bad = illegal_imports(graph)
    assert not bad, "imports of a higher layer:\n" + "\n".join(bad)


def test_the_checks_find_a_circle_and_an_upward_import():
    """Neither check passes vacuously: one import added to the real graph (a reference module reaching the
    checker) is both a circle and an import of a higher layer."""
    graph, _ = import_graph()
    graph.add_import(importer="refnorm.specs.layer_norm", imported="refnorm.check.core")
    adjacency = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    circles = strongly_connected(adjacency)
    assert any({"refnorm.specs.layer_norm", "refnorm.check.core"} <= set(c) for c in circles)
    assert "refnorm.specs -> refnorm.check: refnorm.specs.layer_norm -> refnorm.check.core" in illegal_imports(graph)


def test_the_judge_knows_nothing_of_the_diagnosis_which_knows_nothing_of_the_runner():
    """check/judge.py judges one call; diagnosis.py reads what it produced; core.py runs a case and calls
    the diagnosis on a failure: the judge reaches neither, the diagnosis not the runner."""
    graph, _ = import_graph()
    assert graph.direct_import_exists(importer="refnorm.check.diagnosis", imported="refnorm.check.judge")
    assert graph.direct_import_exists(importer="refnorm.check.core", imported="refnorm.check.diagnosis")
    assert not graph.chain_exists(importer="refnorm.check.judge", imported="refnorm.check.diagnosis")
    assert not graph.chain_exists(importer="refnorm.check.judge", imported="refnorm.check.core")
    assert not graph.chain_exists(importer="refnorm.check.diagnosis", imported="refnorm.check.core")
