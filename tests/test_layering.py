"""The dependency arrows of the house, as data, checked over every import of every module.

Each module of ``gateway/``, ``channels/``, ``brain/`` and ``personas/`` belongs to one
*layer*: the layer whose module prefix is the longest that matches its dotted name.
:data:`MAY_IMPORT` says which layers each layer may import.  Every import counts --
top-level, inside a function (the lazy imports that keep ``partners --help`` fast),
under ``if TYPE_CHECKING`` and relative ones -- because an arrow that only runs at
run time, or only for the type checker, is still an arrow a reader has to follow.

The rules, in words:

- ``gateway.core`` (the vocabulary: messages, events, turns, errors, capabilities,
  probes, config models, the channel state) imports nothing of the project.
- The *commons* are small leaf utilities everyone may use -- one YAML reader, one
  JSON body decoder, one secret scrubber, the SQLite opener, the operator's words
  for an unreachable endpoint, the install hint for an extra; they import only core.
- ``personas`` imports the vocabulary and the YAML reader, never the brain.
- ``brain`` imports the vocabulary, the commons and ``personas``, never a channel.
- A channel imports the vocabulary, the commons, the channel contract
  (``channels.base``, ``channels.registry``), the kit, and its own package -- never
  the brain, another channel or the application.
- The application (the rest of ``gateway/``) may use the brain and the channel
  contract, never a concrete channel nor the kit.
- Only the composition root (``gateway.app``), ``gateway.doctor`` and the CLI
  (``gateway.cli`` and its subcommand modules) import anything; the subcommands
  register themselves on the group (``gateway.cli.group``) and never import the
  entry that lists them, so there is no ``cli`` <-> subcommand cycle.
- ``brain.tools.base`` (the tool contract) never imports the built-in tools.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "channels", "brain", "personas")

#: Layer -> the module prefixes that belong to it (the longest matching prefix decides).
LAYERS: dict[str, tuple[str, ...]] = {
    "core": ("gateway.core",),
    "commons": (
        "gateway.endpoints",
        "gateway.extras",
        "gateway.jsonbody",
        "gateway.languages",
        "gateway.redaction",
        "gateway.validation",
        "gateway.yamlfile",
        "gateway.store.schema",
        "gateway.http.body",
    ),
    "application": ("gateway",),
    "composition root": ("gateway.app", "gateway.doctor"),
    "cli entry": ("gateway.cli.__main__",),  # and the package gateway.cli itself, without its submodules: see ALONE
    "cli commands": ("gateway.cli",),
    "personas": ("personas",),
    "brain": ("brain",),
    "tool contract": ("brain.tools.base", "brain.tools.services"),
    "builtin tools": ("brain.tools.builtin",),
    "channel": ("channels",),  # channels.<name>.*: each channel's own package
    "channel contract": ("channels.base", "channels.registry"),
    "kit": ("channels._kit",),
}

EVERYTHING = frozenset(LAYERS)
BRAIN = frozenset({"brain", "tool contract", "builtin tools"})

#: Layer -> the layers it may import besides its own (a channel: only its own package of the "channel" layer).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "core": frozenset({"core"}),
    "commons": frozenset({"core"}),
    "personas": frozenset({"core", "personas"}) | {"commons"},
    "tool contract": frozenset({"core", "commons", "personas", "brain"}),
    "brain": frozenset({"core", "commons", "personas"}) | BRAIN,
    "builtin tools": frozenset({"core", "commons", "personas"}) | BRAIN,
    "kit": frozenset({"core", "commons", "kit"}),
    "channel contract": frozenset({"core", "commons", "kit", "channel contract"}),
    "channel": frozenset({"core", "commons", "kit", "channel contract"}),  # + its own package
    "application": frozenset({"core", "commons", "application", "channel contract", "personas"}) | BRAIN,
    "composition root": EVERYTHING,
    "cli entry": EVERYTHING,
    "cli commands": EVERYTHING - {"cli entry"},
}

#: Modules that are a layer by themselves, without their submodules (a package's ``__init__``).
ALONE: dict[str, str] = {"gateway.cli": "cli entry"}

#: What the personas may take from the commons (reading persona.yaml), by name.
PERSONAS_COMMONS = frozenset({"gateway.yamlfile"})


def layer_of(module: str) -> str:
    """The layer of a dotted module name: the longest prefix in :data:`LAYERS` that matches."""
    if module in ALONE:
        return ALONE[module]
    best, best_len = "", -1
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = layer, len(prefix)
    return best


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str, root: Path = ROOT) -> bool:
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(path: Path, root: Path = ROOT) -> set[str]:
    """Every project module ``path`` imports, wherever in the file the import stands.

    ``from package import name`` counts as an import of ``package.name`` when that is a
    module (``from gateway import app`` is an arrow to the composition root, not to ``gateway``).
    """
    module = module_name(path, root)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if is_module(submodule, root) else target)
    return {name for name in found if name.split(".")[0] in PACKAGES}


def python_files() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def own_package(module: str) -> str:
    """``channels.telegram.decode`` -> ``channels.telegram``: what a channel may import of itself."""
    return ".".join(module.split(".")[:2])


def allowed(importer: str, imported: str) -> bool:
    source, target = layer_of(importer), layer_of(imported)
    if source == "channel":
        return target in MAY_IMPORT["channel"] or own_package(imported) == own_package(importer)
    if source == "personas" and target == "commons":
        return imported in PERSONAS_COMMONS
    return target == source or target in MAY_IMPORT[source]


def forbidden_edges() -> list[tuple[str, str]]:
    edges = []
    for path in python_files():
        importer = module_name(path)
        for imported in sorted(imports_of(path)):
            if not allowed(importer, imported):
                edges.append((importer, imported))
    return edges


def test_every_module_has_a_layer():
    assert not [module_name(p) for p in python_files() if not layer_of(module_name(p))]


def test_every_layer_has_a_rule():
    assert set(MAY_IMPORT) == set(LAYERS)


def test_no_import_breaks_the_matrix():
    edges = forbidden_edges()
    assert not edges, "\n".join(
        f"{a} ({layer_of(a)}) -> {b} ({layer_of(b)})" for a, b in edges
    )


def test_the_matrix_sees_lazy_and_type_checking_imports(tmp_path):
    """A forbidden import hidden in a function or under TYPE_CHECKING is still found."""
    package = tmp_path / "channels" / "fake"
    package.mkdir(parents=True)
    source = package / "channel.py"
    (package / "decode.py").write_text("", encoding="utf-8")
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from brain.loop import Responder\n"
        "def later():\n    from gateway.pipeline import lanes\n    from . import decode\n",
        encoding="utf-8",
    )
    assert imports_of(source, tmp_path) == {"brain.loop", "gateway.pipeline", "channels.fake.decode"}
    assert not allowed("channels.fake.channel", "brain.loop")
    assert not allowed("channels.fake.channel", "gateway.pipeline")
    assert allowed("channels.fake.channel", "channels.fake.decode")
    assert not allowed("channels.fake.channel", "channels.other.decode")
    assert not allowed("gateway.cli.kb", "gateway.cli")
    assert allowed("gateway.cli", "gateway.cli.kb")
    assert not allowed("personas.loader", "brain.types")
    assert not allowed("gateway.core.turns", "gateway.redaction")
    assert allowed("gateway.console.texts", "gateway.languages")
    assert allowed("channels.webchat.api", "gateway.languages")
    assert not allowed("gateway.console.texts", "channels._kit.ack")
