"""The package's layer rule (docs/architecture.md): imports only point down, world → model/metrics → store → train →
studio → serve/ui/cli; `world` uses nothing of ours but the base modules (`problems`, `settings`); and studio/ is the
only door: ui/, cli/ and serve/ never reach store/ or train/ themselves.

Read from the source with `ast` (imports inside functions count too), so a new upward import fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "wmstudio"
LAYERS = {  # lower number = lower layer; a module may import its own layer and any lower one
    "problems": 0, "locations": 0, "network": 0, "settings": 0,
    "world": 1,
    "model": 2, "metrics": 2,
    "store": 3,
    "train": 4,
    "studio": 5,
    "serve": 6, "ui": 6, "cli": 6,
}


def room_of(module: str) -> str:
    """`wmstudio.world.tools.schema` -> `world`; `wmstudio.cli` -> `cli`."""
    return module.split(".")[1]


def package_imports(package: Path = PACKAGE) -> list[tuple[str, str, int]]:
    """(importing module, imported wmstudio module, line) for every import in the package."""
    found = []
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [(module, name, node.lineno) for name in names if name.startswith("wmstudio.")]
    return found


def test_every_room_has_a_layer():
    rooms = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")}
    assert rooms <= set(LAYERS), f"give these a layer in LAYERS: {sorted(rooms - set(LAYERS))}"


def upward_imports(package: Path = PACKAGE) -> list[str]:
    return [f"{src} (line {line}) imports {dst}" for src, dst, line in package_imports(package)
            if LAYERS[room_of(dst)] > LAYERS[room_of(src)]]


def test_imports_only_point_down():
    upward = upward_imports()
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_world_uses_nothing_of_ours_but_the_base_modules():
    reaching = [f"{src} (line {line}) imports {dst}" for src, dst, line in package_imports()
                if room_of(src) == "world" and room_of(dst) not in ("world", "problems", "settings")]
    assert not reaching, "\n".join(reaching)


DOORS = ("ui", "cli", "serve")  # what users and clients touch: every action goes through a studio/ service
BEHIND_THE_DOOR = ("store", "train")


def bypassing_imports(package: Path = PACKAGE) -> list[str]:
    """Imports by which ui/, cli/ or serve/ reach store/ or train/ without going through studio/."""
    return [f"{src} (line {line}) imports {dst}: use the studio/ service instead" for src, dst, line
            in package_imports(package) if room_of(src) in DOORS and room_of(dst) in BEHIND_THE_DOOR]


def test_studio_is_the_only_door_to_the_store_and_the_trainers():
    bypassing = bypassing_imports()
    assert not bypassing, "\n".join(bypassing)


def test_the_door_rule_catches_a_tab_that_reaches_the_store_itself(tmp_path):
    package = tmp_path / "wmstudio"
    for room in ("ui", "cli", "studio"):
        (package / room).mkdir(parents=True)
        (package / room / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "ui" / "tab.py").write_text("from wmstudio.studio.worlds import list_worlds\n"
                                           "from wmstudio.store import get_world\n")
    (package / "cli" / "runs.py").write_text("def show():\n    from wmstudio.train.agent.jobs import cancel_job\n")
    assert bypassing_imports(package) == [
        "wmstudio.cli.runs (line 2) imports wmstudio.train.agent.jobs: use the studio/ service instead",
        "wmstudio.ui.tab (line 2) imports wmstudio.store: use the studio/ service instead"]


def test_ui_is_imported_only_by_the_app_and_the_serve_command():
    importers = {src for src, dst, _ in package_imports() if room_of(dst) == "ui" and room_of(src) != "ui"}
    assert importers <= {"wmstudio.cli.serving"}, importers


def test_the_rule_catches_an_upward_import_even_inside_a_function(tmp_path):
    package = tmp_path / "wmstudio"
    (package / "world").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "world" / "__init__.py").write_text("")
    (package / "world" / "spec.py").write_text("def load():\n    from wmstudio.store import open_store\n")
    assert upward_imports(package) == ["wmstudio.world.spec (line 2) imports wmstudio.store"]


WINGED = {"world": 12, "model": 0, "train": 0}  # room -> how many modules its top level may hold beside wings


def wing_imports(room: str, package: Path = PACKAGE) -> dict[tuple[str, str], list[str]]:
    """(importing wing, imported wing) -> the imports between two wings of `room`."""
    between: dict[tuple[str, str], list[str]] = {}
    for src, dst, _ in package_imports(package):
        parts, target = src.split("."), dst.split(".")
        if parts[1] == target[1] == room and len(parts) > 3 and len(target) > 3 and parts[2] != target[2]:
            between.setdefault((parts[2], target[2]), []).append(f"{src} imports {dst}")
    return between


@pytest.mark.parametrize("room", sorted(WINGED))
def test_a_large_room_is_kept_in_wings(room):
    """world/, model/ and train/ hold at their top level only what every wing uses (docs/architecture.md, "by
    wing"); a new module goes into the wing of its concept. Wings import one another one way only, round no loop."""
    top = sorted(p.stem for p in (PACKAGE / room).glob("*.py") if p.stem != "__init__")
    assert len(top) <= WINGED[room], f"{room}/ has {len(top)} modules at its top level: {top}"
    between = wing_imports(room)
    graph: dict[str, set[str]] = {}
    for src, dst in between:
        graph.setdefault(src, set()).add(dst)
    loops = strongly_connected(graph)
    assert not loops, "wings importing round a loop: " + "; ".join(
        " <-> ".join(loop) + f" ({next(between[pair][0] for pair in between if set(pair) <= set(loop))})"
        for loop in loops)


def test_the_halves_of_training_never_import_each_other():
    assert not wing_imports("train"), wing_imports("train")


def module_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (inside functions too); `from pkg import sub` points at the
    submodule, not at the package's __init__."""
    modules = {".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
               for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for src, dst, _ in package_imports(package):
        graph[src].add(dst)
    for path in package.rglob("*.py"):  # `from wmstudio.world import spec` imports the module `spec`
        src = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{alias.name}" for alias in node.names} & modules
                if subs and len(subs) == len(node.names):
                    graph[src].discard(node.module)
                graph[src] |= subs
    return {module: {dst for dst in targets if dst in modules and dst != module} for module, targets in graph.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every set of two or more nodes of `graph` that reach one another (Tarjan), each sorted."""
    nodes = sorted(set(graph) | {target for targets in graph.values() for target in targets})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    loops: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            loop = []
            while not loop or loop[-1] != node:
                loop.append(stack.pop())
                on.discard(loop[-1])
            if len(loop) > 1:
                loops.append(sorted(loop))

    for node in nodes:
        if node not in index:
            visit(node)
    return loops


def import_loops(package: Path = PACKAGE) -> list[list[str]]:
    """Every set of modules that import one another round a loop, whatever their folders: a loop through a room's
    top-level modules is invisible to the folder rules above."""
    return strongly_connected(module_graph(package))


def test_no_modules_import_one_another_round_a_loop():
    loops = import_loops()
    assert not loops, "modules importing round a loop: " + "; ".join(" <-> ".join(loop) for loop in loops)


def test_the_loop_rule_sees_a_loop_through_one_rooms_top_level_modules(tmp_path):
    package = tmp_path / "wmstudio"
    (package / "world" / "tools").mkdir(parents=True)
    for init in (package, package / "world", package / "world" / "tools"):
        (init / "__init__.py").write_text("")
    (package / "world" / "spec.py").write_text("from wmstudio.world.tools import schema\n")
    (package / "world" / "tools" / "schema.py").write_text("def infer():\n    from wmstudio.world import history\n")
    (package / "world" / "history.py").write_text("from wmstudio.world.spec import load\n")
    assert import_loops(package) == [["wmstudio.world.history", "wmstudio.world.spec", "wmstudio.world.tools.schema"]]
