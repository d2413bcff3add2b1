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
