"""The shape of the code: the layering contracts, no import cycle, no over-long function.

The layering is written as import-linter contracts in ``pyproject.toml`` (``[tool.importlinter]``)
and checked here by running ``lint-imports``. What import-linter cannot say is checked on the
import graph that it reads (built by ``grimp``): no cycle between any two of the project's
modules (imports under ``TYPE_CHECKING`` count) and no function over ``MAX_FUNCTION_LINES``.
Further tests make sure none of this passes vacuously: the graph is this checkout's, it has the
modules and imports it should, and each contract breaks when an import it forbids is added.

The rules cover the project's packages (``PACKAGES``), not the tests or the benchmarks.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import networkx as nx
import pytest
from importlinter import api as importlinter_api
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.domain.contract import Contract
from importlinter.domain.imports import ModuleExpression

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "reasoning", "models", "sporal_labelstudio")
MAX_FUNCTION_LINES = 60
CONTRACT_TYPES: dict[str, type[Contract]] = {
    "forbidden": ForbiddenContract,
    "acyclic_siblings": AcyclicSiblingsContract,
}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """The import graph of ``PACKAGES`` as this checkout has them (no cache written)."""
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.origin is not None, f"{package} is not importable"
        assert Path(spec.origin).resolve().is_relative_to(ROOT), (
            f"{package} resolves to {spec.origin}, not to this checkout {ROOT}: "
            "set PYTHONPATH to the checkout")
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> Iterator[tuple[int, str, int]]:
    """The functions of a module's source longer than ``limit`` lines.

    A function counts from its ``def`` line to its last line, docstring included; a function
    nested in another counts toward the outer one and is not measured on its own. Methods are
    functions.

    Parameters
    ----------
    source
        The module's text.
    limit
        The most lines a function may have.

    Yields
    ------
    tuple of (int, str, int)
        The line of the ``def``, the function's name and its length in lines.
    """
    def visit(node: ast.AST) -> Iterator[tuple[int, str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > limit:
                    yield child.lineno, child.name, length
            else:
                yield from visit(child)

    yield from visit(ast.parse(source))


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """One cycle through each group of modules that import each other, shortest groups first."""
    directed = nx.DiGraph()
    for module in graph.modules:
        directed.add_node(module)
        for imported in graph.find_modules_directly_imported_by(module):
            directed.add_edge(module, imported)
    groups = [group for group in nx.strongly_connected_components(directed) if len(group) > 1]
    cycles = []
    for group in sorted(groups, key=lambda group: (len(group), sorted(group))):
        edges = nx.find_cycle(directed.subgraph(group), source=min(group))
        cycles.append([importer for importer, _ in edges])
    return cycles


def describe_import(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    """``importer -> imported (file:line)`` for the first line where the import is written."""
    details = graph.get_import_details(importer=importer, imported=imported)
    line = min((detail["line_number"] for detail in details), default=0)
    path = Path(*importer.split("."))
    file = path / "__init__.py" if (ROOT / path).is_dir() else path.with_suffix(".py")
    return f"{importer} -> {imported} ({file}:{line})"


def test_lint_imports_keeps_every_contract_in_pyproject() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    code = "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"
    run = subprocess.run([sys.executable, "-c", code, "--no-cache", "--no-logo"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"lint-imports found broken contracts:\n{run.stdout}{run.stderr}"


def test_no_import_cycle_between_modules(graph: grimp.ImportGraph) -> None:
    cycles = import_cycles(graph)
    described = [
        "\n".join(f"  {describe_import(graph, importer, imported)}"
                  for importer, imported in zip(cycle, cycle[1:] + cycle[:1], strict=True))
        for cycle in cycles
    ]
    assert not cycles, f"{len(cycles)} import cycle(s):\n" + "\n\n".join(described)


def test_no_function_longer_than_the_limit() -> None:
    offenders = [
        (length, f"{path.relative_to(ROOT)}:{line} {name} ({length} lines)")
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, name, length in long_functions(path.read_text(encoding="utf-8"))
    ]
    listed = "\n".join(f"  {where}" for _, where in sorted(offenders, reverse=True))
    assert not offenders, (
        f"{len(offenders)} function(s) over {MAX_FUNCTION_LINES} lines, def to last line:\n"
        f"{listed}")


def function_source(name: str, length: int, indent: str = "") -> str:
    """A function ``length`` lines long from its ``def``, with a docstring, at ``indent``."""
    body = [f'{indent}    """Doc."""'] + [f"{indent}    x{i} = {i}" for i in range(length - 2)]
    return "\n".join([f"{indent}def {name}():", *body]) + "\n"


def test_function_length_counts_def_to_last_line_with_nested_functions() -> None:
    at_limit = function_source("at_limit", MAX_FUNCTION_LINES)
    over = function_source("over", MAX_FUNCTION_LINES + 1)
    nested = function_source("outer", 3) + function_source("inner", MAX_FUNCTION_LINES - 2, "    ")
    method = "class C:\n    @staticmethod\n" + function_source("m", MAX_FUNCTION_LINES + 1, "    ")
    assert list(long_functions(at_limit)) == []
    assert list(long_functions(over)) == [(1, "over", MAX_FUNCTION_LINES + 1)]
    assert list(long_functions(nested)) == [(1, "outer", MAX_FUNCTION_LINES + 1)]
    assert list(long_functions(method)) == [(3, "m", MAX_FUNCTION_LINES + 1)]


def test_the_graph_counts_imports_under_type_checking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "typed_only"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from typed_only import b\n")
    (package / "b.py").write_text("from typed_only import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    typed_only = grimp.build_graph("typed_only", cache_dir=None)
    assert import_cycles(typed_only) == [["typed_only.a", "typed_only.b"]]
    configuration = importlinter_api.read_configuration(str(ROOT / "pyproject.toml"))
    assert not configuration["session_options"].get("exclude_type_checking_imports", False)


def test_the_graph_has_every_package_and_the_imports_between_them(
        graph: grimp.ImportGraph) -> None:
    for package in PACKAGES:
        assert len(graph.find_descendants(package)) >= 2, f"grimp found no modules in {package}"
    assert graph.find_matching_direct_imports(import_expression="app.** -> reasoning.**")
    assert graph.find_matching_direct_imports(import_expression="app.** -> models.**")


def contracts() -> list[Contract]:
    """The import-linter contracts of ``pyproject.toml``, as import-linter reads them."""
    configuration = importlinter_api.read_configuration(str(ROOT / "pyproject.toml"))
    return [
        CONTRACT_TYPES[options["type"]](options["name"], configuration["session_options"],
                                        options)
        for options in configuration["contracts_options"]
    ]


def test_pyproject_has_the_layering_contracts() -> None:
    configuration = importlinter_api.read_configuration(str(ROOT / "pyproject.toml"))
    assert sorted(configuration["session_options"]["root_packages"]) == sorted(PACKAGES)
    forbidden = {
        (source, target)
        for options in configuration["contracts_options"] if options["type"] == "forbidden"
        for source in options["source_modules"] for target in options["forbidden_modules"]
    }
    layers = {("reasoning", "app"), ("reasoning", "models"), ("reasoning", "sporal_labelstudio"),
              ("models", "app"), ("models", "reasoning"), ("models", "sporal_labelstudio"),
              ("sporal_labelstudio", "app")}
    reads = {"team", "agreement", "asking", "disagreements", "answers", "labels.listing",
             "labels.proofs"}
    writes = {"labels.policy", "labels.strict", "labels.consensus", "labels.change",
              "labels.shared"}
    assert forbidden == layers | {(f"app.services.{r}", f"app.services.{w}")
                                  for r in reads for w in writes}
    acyclic = [options for options in configuration["contracts_options"]
               if options["type"] == "acyclic_siblings"]
    assert [sorted(options["ancestors"]) for options in acyclic] == [["app", "reasoning"]]


def forbidden_imports(contract: Contract, graph: grimp.ImportGraph) -> Iterator[tuple[str, str]]:
    """Imports that ``contract`` forbids, one for each rule it states, between existing modules.

    A forbidden contract gets one import per pair of source and forbidden package; an acyclic
    one gets, for each ancestor, an import each way between two of its children.
    """
    if isinstance(contract, ForbiddenContract):
        sources: set[ModuleExpression] = contract.source_modules  # type: ignore[assignment]
        targets: set[ModuleExpression] = contract.forbidden_modules  # type: ignore[assignment]
        for source, target in itertools.product(sources, targets):
            yield f"{source.expression}.added", target.expression
    else:
        ancestors: set[ModuleExpression] = contract.ancestors  # type: ignore[attr-defined]
        for ancestor in ancestors:
            first, second = sorted(graph.find_children(ancestor.expression))[:2]
            yield first, second
            yield second, first


@pytest.mark.parametrize("contract", contracts(), ids=lambda contract: contract.name)
def test_each_contract_breaks_when_an_import_it_forbids_is_added(
        graph: grimp.ImportGraph, contract: Contract) -> None:
    added = list(forbidden_imports(contract, graph))
    assert added
    groups = [added] if isinstance(contract, AcyclicSiblingsContract) else [[a] for a in added]
    for imports in groups:
        broken = copy.deepcopy(graph)
        for importer, imported in imports:
            broken.add_import(importer=importer, imported=imported)
        assert not contract.check(broken, verbose=False).kept, f"{contract.name}: {imports}"


MAX_POLICY_NAME_COMPARISONS = 2


def policy_name_comparisons(source: str, names: set[str]) -> Iterator[int]:
    """The lines of ``source`` that compare something with a label policy's name."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for operand in operands:
                elements = operand.elts if isinstance(operand, ast.Tuple | ast.List | ast.Set) \
                    else [operand]
                if any(isinstance(e, ast.Constant) and e.value in names for e in elements):
                    yield node.lineno
                    break


def test_the_label_policy_is_an_object_not_a_name_tested_everywhere() -> None:
    from app.services.labels.policy import POLICIES

    names = set(POLICIES)
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / "app").rglob("*.py"))
             for line in policy_name_comparisons(path.read_text(), names)]
    assert len(found) <= MAX_POLICY_NAME_COMPARISONS, found


def test_policy_name_comparisons_are_found() -> None:
    source = 'a = p == "strict"\nb = "consensus" != q\nc = p in ("strict", "x")\nd = p == "x"\n'
    assert list(policy_name_comparisons(source, {"strict", "consensus"})) == [1, 2, 3]
