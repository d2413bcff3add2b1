"""The import layers the code map promises (docs/architecture.md), read from the code's
own import statements (every one: module level, inside functions, under TYPE_CHECKING):
`server -> restore -> protocol`, and the store interface is the only way into a store."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BACKENDS = ("restore.stores.embedded", "restore.stores.postgres")


def module_of(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(package: str) -> Iterator[tuple[str, str]]:
    """(importing module, imported module) for every import in `package`'s files; a
    relative import is resolved against the importing module."""
    for path in sorted((REPO / package).rglob("*.py")):
        importer = module_of(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield importer, alias.name
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = importer.split(".")
                    if path.name != "__init__.py":
                        anchor = anchor[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                yield importer, base
                for alias in node.names:  # `from restore import x` may name a module
                    yield importer, f"{base}.{alias.name}"


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_layers_import_one_way_server_restore_protocol() -> None:
    upward = [
        (importer, imported)
        for package, forbidden in (("protocol", ("restore", "server")), ("restore", ("server",)))
        for importer, imported in imports(package)
        if any(under(imported, name) for name in forbidden)
    ]
    assert upward == []


def test_only_the_stores_package_reaches_a_backends_modules() -> None:
    """Everything else asks the store interface (restore/stores/api.py) and gets a store
    from `restore.stores.open_store` or `restore.service.open_service`."""
    reaching = [
        (importer, imported)
        for package in ("protocol", "restore", "server")
        for importer, imported in imports(package)
        if any(under(imported, backend) for backend in BACKENDS)
        and not under(importer, "restore.stores")
    ]
    assert reaching == []


def test_the_postgresql_store_imports_nothing_of_the_embedded_one() -> None:
    shared = [
        (importer, imported)
        for importer, imported in imports("restore/stores/postgres")
        if under(imported, "restore.stores.embedded")
    ]
    assert shared == []


def test_the_checker_sees_the_imports_it_is_given() -> None:
    """The walk above finds what it must (else every test here passes on nothing)."""
    found = set(imports("restore"))
    assert ("restore.stores", "restore.stores.embedded.store") in found  # inside a function
    assert ("restore.service.threads", "restore.stores.api") in found


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (every import counted, those under
    TYPE_CHECKING and inside functions too: a type-only circle is still a circle)."""
    modules = {module_of(path) for path in (REPO / package).rglob("*.py")}
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for importer, imported in imports(package):
        if imported in modules and imported != importer:
            graph[importer].add(imported)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while (top := stack.pop()) != module:
                component.append(top)
            component.append(module)
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle_among_server_modules() -> None:
    """Each server module can be read knowing only what it imports: features take the
    host interface (server/host.py), the composition root (server/app.py) imports them."""
    assert cycles(import_graph("server")) == []


def test_no_import_circle_among_the_agents_and_the_importer() -> None:
    """An agent's folder imports nothing that imports it back: the registry loads each
    folder by name, the importer asks the agent's interface (restore/agents/api.py), and a
    parser imports only the shared skeleton (restore/sources/handoff.py once imported all
    three parsers, and each of them imported it back)."""
    graph = import_graph("restore")
    found = [
        component
        for component in cycles(graph)
        if any(under(m, p) for m in component for p in ("restore.agents", "restore.imports",
                                                       "restore.sources"))
    ]  # fmt: skip
    assert found == []
    assert "restore.agents.api" in graph["restore.agents.registry"]  # the walk sees them


def test_no_import_circle_in_protocol_nor_restore() -> None:
    """Each module can be read knowing only what it imports: where a part is given the
    whole that made it (a subsystem its verdict, the search process its search, the
    PostgreSQL store's parts the store, `thread/continue` the thread service), it knows
    it by a small interface of its own (restore/engine/outcome.py,
    restore/stores/postgres/host.py, restore/service/continuation.py `Service`)."""
    assert cycles(import_graph("protocol")) == []
    assert cycles(import_graph("restore")) == []
    graph = import_graph("restore")
    assert "restore.service.continuation" in graph["restore.service.threads"]  # it sees it


FLOORS = {
    "server.rpc": ("server.rpc", "server.config", "server.worker"),
    "server.transport": ("server.transport", "server.rpc", "server.config",
                         "server.handlers.handshake"),
}  # fmt: skip
"""The server's lowest floors and all they may reach of it: JSON-RPC knows no transport and
no application; a transport knows the application only as `Served`
(server/transport/served.py), and the handshake's answer (server/transport/early.py)."""


def test_the_servers_lowest_floors_reach_nothing_above_them() -> None:
    upward = [
        (importer, imported)
        for floor, allowed in FLOORS.items()
        for importer, imported in imports(floor.replace(".", "/"))
        if under(imported, "server") and imported != "server.handlers"
        and not any(under(imported, name) for name in allowed)
    ]  # fmt: skip
    assert upward == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
