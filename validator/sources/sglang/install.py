"""Evidence about the SGLang build the server will run, read as files and never imported.

Importing sglang pulls in torch and may touch the GPU. The package is located in the server's interpreter
(``sglang.interpreter``) and its relevant files parsed with ``ast``: version, ``srt/environ.py``'s variables,
which draft classes take the target's LM-head module, MoE backend choices. Anything unreadable is ``None``
plus a ``note``, so checks report ``error``/``skip``, never ``pass``.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import stat
import textwrap
from pathlib import Path

from validator.bounded_files import looks_like, names_in, read_below, read_head
from validator.errors import InputError
from validator.facts import SGLangInstallFacts
from validator.sources.host.dists import metadata_version
from validator.sources.sglang.interpreter import InterpreterProbe

_SOURCE_CAP = 16 * 1024 * 1024  # SGLang's largest source file is ~300 KB; a FIFO or /dev/zero is refused

SHARE_HOOK = "set_lm_head_from_target"
# SGLang's draft model files, by a word in their names: the NEXTN/MTP layers (``bailing_moe_nextn.py``,
# ``qwen3_5_mtp.py``) and the EAGLE heads (``llama_eagle3.py``); the DSpark drafts are read apart.
DRAFT_MODEL_FILES = ("nextn", "mtp", "eagle")
_CLASS_LINE = re.compile(rb"^class\s+(\w+)", re.MULTILINE)
CHOICES_NAME = "MOE_RUNNER_BACKEND_CHOICES"
PLUGIN_GROUP = "sglang.srt.plugins"


def _is_dir(path: Path) -> bool:
    """A look by name as the launch's owners could look (``bounded_files.looks_like``): where they could
    not, it is taken to be there, and its read says why, the same words whether it is."""
    return looks_like(path, stat.S_ISDIR, "the SGLang install")


def _is_file(path: Path) -> bool:
    return looks_like(path, stat.S_ISREG, "the SGLang install")


def _glob(directory: Path, pattern: str) -> list[Path]:
    """``directory``'s entries matching ``pattern``, sorted, listed as the launch's owners could list it
    (``bounded_files.names_in``: none where they could not), never as this process for them."""
    try:
        names = names_in(directory, "a directory of the SGLang install")
    except InputError:
        return []
    return [directory / n for n in sorted(names) if fnmatch.fnmatchcase(n, pattern)]


def install_from_probe(
    probe: InterpreterProbe, *, dspark: bool = False, tool_call_parser: str | None = None
) -> SGLangInstallFacts:
    """The sglang package the probed interpreter (run as the server runs it) imports, read; root None (with
    a note) if it cannot be found. There is deliberately no "current environment" fallback: this process's
    packages prove nothing about the server's."""
    located_by = f"interpreter {probe.interpreter}"
    if probe.error:
        return SGLangInstallFacts(root=None, located_by=located_by, note=probe.error)
    if probe.sglang_root is None:
        return SGLangInstallFacts(
            root=None, located_by=located_by, note=f"sglang is not importable by {probe.interpreter}"
        )
    return read_sglang_install(
        probe.sglang_root,
        located_by,
        site_dirs=probe.site_dirs,
        dspark=dspark,
        tool_call_parser=tool_call_parser,
    )


def read_sglang_install(
    root: Path | str,
    located_by: str,
    *,
    site_dirs: list[Path] | None = None,
    dspark: bool = False,
    tool_call_parser: str | None = None,
) -> SGLangInstallFacts:
    """Read the facts from an sglang package directory, by parsing files only: ``draft_share_hook`` over
    ``DRAFT_MODEL_FILES``; ``site_dirs`` for entry points; ``dspark`` adds the DSpark worker and drafts;
    ``tool_call_parser`` is resolved to its detector and the parsers extending it."""
    r = Path(root)
    facts = SGLangInstallFacts(root=r, located_by=located_by)
    notes: list[str] = []
    if not _is_dir(r / "srt"):
        facts.note = f"{r} does not look like an sglang package (no srt/)"
        return facts
    facts.version = _version(r, notes)

    environ = _parse(r / "srt" / "environ.py", notes)
    if environ is not None:
        fields, aliases = _declared_env(environ)
        facts.environ_declares = fields | aliases
        facts.declared_env = {n for n in fields | aliases if n.startswith("SGLANG_")}

    guard = read_share_guard(r / "srt" / "speculative", notes)
    if guard is not None:
        facts.share_skipped_by, facts.share_skipped_by_draft = guard
    facts.draft_share_hook = _draft_share_hook(
        r / "srt" / "models", notes, facts.share_skipped_by_draft or [], facts.draft_sets
    )

    facts.moe_runner_backends = _moe_choices(r, notes)
    if dspark:
        _read_dspark(r, facts, notes)
    facts.redirects_flashinfer_cache = _redirects_flashinfer_cache(r)
    if tool_call_parser:
        _read_detectors(r, tool_call_parser, facts, notes)
    facts.site_dirs = list(dict.fromkeys([r.parent, *(site_dirs or [])]))
    facts.plugins = installed_plugins(facts.site_dirs)
    facts.note = "; ".join(notes) or None
    return facts


DSPARK_WORKER = "srt/speculative/dspark_components/dspark_worker_v2.py"
DSPARK_ATTACH = "attach_shared_modules"
DSPARK_OWN_VOCAB = "uses_own_vocab_modules"


def _read_dspark(r: Path, facts: SGLangInstallFacts, notes: list[str]) -> None:
    """How the installed DSpark worker gives the draft its LM head (0.5.23's ``DSparkWorkerV2.__init__``
    ``attach_shared_modules`` unless ``uses_own_vocab_modules``), and which draft classes keep their own
    (``EntryClass`` of ``srt/models/*dspark*.py``)."""
    worker = r / DSPARK_WORKER
    if not _is_file(worker):
        # a build from before DSpark (0.5.9 has neither the worker nor the enum member): the server
        # refuses the algorithm at start; an unreadable enum leaves it unknown
        facts.dspark_supported = _enum_has(r / SPEC_INFO, "SpeculativeAlgorithm", "DSPARK", notes)
        return
    facts.dspark_supported = True
    tree = _parse(worker, notes)
    if tree is None:
        return
    attaches = guarded = False
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == DSPARK_ATTACH
        ):
            attaches = attaches or any(kw.arg == "lm_head" for kw in node.keywords)
        if isinstance(node, ast.Constant) and node.value == DSPARK_OWN_VOCAB:
            guarded = True
    facts.dspark_attaches_lm_head = attaches
    if attaches and not guarded:
        notes.append(f"{DSPARK_WORKER}: attach_shared_modules is not guarded by {DSPARK_OWN_VOCAB}")
    facts.dspark_draft_classes = _dspark_classes(r, notes)


SPEC_INFO = "srt/speculative/spec_info.py"


def _enum_has(path: Path, enum: str, member: str, notes: list[str]) -> bool | None:
    """Whether class ``enum`` in ``path`` assigns ``member`` (``DSPARK = auto()``); None: not readable."""
    if not _is_file(path):
        return None
    tree = _parse(path, notes)
    cls = _find_class(tree, enum) if tree is not None else None
    if cls is None:
        return None
    return any(_assign_parts(item)[0] == member for item in cls.body)


def _dspark_classes(r: Path, notes: list[str]) -> dict[str, bool | None]:
    """Registered DSpark draft classes -> ``uses_own_vocab_modules`` (True/False; None when it is an
    expression such as ``_is_npu``, decided by the platform at import)."""
    own: dict[str, object] = {}  # class -> its own assignment (ast.expr) or absent
    bases: dict[str, list[str]] = {}
    entries: list[str] = []
    for path in _glob(r / "srt" / "models", "*dspark*.py"):
        tree = _parse(path, notes)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]
                for item in node.body:
                    target, value = _assign_parts(item)
                    if target == DSPARK_OWN_VOCAB and value is not None:
                        own[node.name] = value
            target, value = _assign_parts(node)
            if target == "EntryClass" and value is not None:
                elts = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
                entries += [e.id for e in elts if isinstance(e, ast.Name)]

    def resolve(name: str, depth: int = 0) -> bool | None:
        if name in own:
            value = own[name]
            if isinstance(value, ast.Constant) and isinstance(value.value, bool):
                return value.value
            return None
        if depth > 20:
            return None
        for base in bases.get(name, []):
            found = resolve(base, depth + 1)
            if found is not False:
                return found
        return False  # getattr(draft_model, "uses_own_vocab_modules", False)

    return {name: resolve(name) for name in dict.fromkeys(entries)}


def _redirects_flashinfer_cache(r: Path) -> bool | None:
    """sglang 0.5.23's ``__init__`` calls ``redirect_third_party_caches()``, whose defaults set
    ``FLASHINFER_WORKSPACE_BASE`` to ``SGLANG_CACHE_DIR`` (``~/.cache/sglang``) unless already set."""
    try:
        init = read_head(r / "__init__.py", 1_000_000)
        environ = read_head(r / "srt" / "environ.py", 5_000_000)
    except OSError:
        return None
    return b"redirect_third_party_caches()" in init and b'"FLASHINFER_WORKSPACE_BASE"' in environ


FUNCTION_CALL = "srt/function_call"
_PARSER_ENUM = ("FunctionCallParser", "ToolCallParserEnum")  # the class and its name -> detector table


def _read_detectors(r: Path, requested: str, facts: SGLangInstallFacts, notes: list[str]) -> None:
    """``requested`` and every parser whose detector extends it -> the detector class and its bases within
    ``srt/function_call/`` (nearest first) with what each defines, from ``ToolCallParserEnum``; only modules
    naming the class are parsed, and a base outside the package ends a chain."""
    base = r / FUNCTION_CALL
    if not _is_file(base / "function_call_parser.py"):
        return  # a build without the table: not known (the check says the detectors could not be read)
    tree = _parse(base / "function_call_parser.py", notes)
    if tree is None:
        return
    table: dict[str, str] = {}
    cls = _find_class(tree, _PARSER_ENUM[0])
    for node in cls.body if cls is not None else []:
        target, value = _assign_parts(node)
        if target == _PARSER_ENUM[1] and isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Name):
                    table[k.value] = v.id
    if not table:
        notes.append(f"{FUNCTION_CALL}/function_call_parser.py: no {'.'.join(_PARSER_ENUM)} table")
        return
    modules: dict[str, ast.Module | None] = {}

    def module(name: str) -> ast.Module | None:
        if name not in modules:
            modules[name] = _parse(base / f"{name}.py", notes) if re.fullmatch(r"\w+", name) else None
        return modules[name]

    def imported(tree: ast.Module, cls_name: str) -> str | None:
        for node in tree.body:
            if (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("sglang.srt.function_call.")
                and any(a.name == cls_name and a.asname is None for a in node.names)
            ):
                return (node.module or "").rsplit(".", 1)[-1]
        return None

    if requested not in table:
        facts.tool_call_detectors = {}
        return
    wanted = table[requested].encode()
    names = [requested]
    for name, cls_name in table.items():
        home = imported(tree, cls_name)
        if name == requested or home is None:
            continue
        try:
            if wanted in read_head(base / f"{home}.py", _SOURCE_CAP):
                names.append(name)
        except OSError:
            continue
    target = table[requested]
    detectors: dict[str, tuple[str, ...]] = {requested: (target,)}
    for name in names[1:]:  # each walks up to the requested class, which it is read only to reach
        chain: list[str] = []
        where = imported(tree, table[name])
        current: str | None = table[name]
        while current is not None and where is not None and len(chain) < 16 and current not in chain:
            if current == target:
                detectors[name] = (*chain, target)
                break
            mod = module(where)
            found = _find_class(mod, current) if mod is not None else None
            if mod is None or found is None:
                break
            chain.append(current)
            facts.detector_members[current] = tuple(sorted(_defines(found)))
            facts.detector_docs[current] = " ".join((ast.get_docstring(found) or "").split())[:400]
            first = found.bases[0] if found.bases else None
            current = first.id if isinstance(first, ast.Name) else None
            if current is not None and _find_class(mod, current) is None:
                where = imported(mod, current)
    facts.tool_call_detectors = detectors


def _defines(cls: ast.ClassDef) -> set[str]:
    """What a class defines itself: class attributes, methods, and the ``self.X`` its ``__init__`` sets."""
    out: set[str] = set()
    for node in cls.body:
        target, _ = _assign_parts(node)
        if target is not None:
            out.add(target)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name != "__init__":
                out.add(node.name)
                continue
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Assign, ast.AnnAssign)):
                    for t in sub.targets if isinstance(sub, ast.Assign) else [sub.target]:
                        if isinstance(t, ast.Attribute) and _is_self(t.value):
                            out.add(t.attr)
    return out


def installed_plugins(site_dirs: list[Path]) -> set[str]:
    """Names in the ``sglang.srt.plugins`` entry-point group, as ``importlib.metadata`` would list them
    in the server's interpreter (SGLang's ``load_plugins`` reads that group)."""
    names: set[str] = set()
    for d in dict.fromkeys(site_dirs):
        for ep in [p / "entry_points.txt" for p in [*_glob(d, "*.dist-info"), *_glob(d, "*.egg-info")]]:
            try:
                text = read_head(ep, 1 << 20).decode("utf-8", "replace")
            except OSError:
                continue
            section = ""
            for raw in text.splitlines():
                line = raw.strip()
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1].strip()
                elif section == PLUGIN_GROUP and "=" in line and not line.startswith(("#", ";")):
                    names.add(line.partition("=")[0].strip())
    return names


def _parse(path: Path, notes: list[str]) -> ast.Module | None:
    rel = path.as_posix().rsplit("/sglang/", 1)[-1]
    try:
        source = read_head(path, _SOURCE_CAP)
    except OSError as exc:
        notes.append(f"{rel}: cannot read ({exc.strerror or exc})")
        return None
    if len(source) >= _SOURCE_CAP:  # cut at the cap, a part can parse and say what the whole does not
        notes.append(f"{rel}: over {_SOURCE_CAP} bytes, not read whole")
        return None
    try:
        return ast.parse(source, filename=str(path))
    except (RecursionError, MemoryError):  # nesting past the parser's limits: CPython refuses it too
        notes.append(f"{rel}: does not parse (nested too deeply)")
        return None
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        notes.append(f"{rel}: does not parse" + (f" (line {line})" if line else ""))
        return None


def _version(r: Path, notes: list[str]) -> str | None:
    """_version.py (what version.py imports), then version.py, then the dist-info beside the package."""
    for name in ("_version.py", "version.py"):
        path = r / name
        if _is_file(path):
            tree = _parse(path, notes)
            found = _str_assignment(tree, "__version__") if tree else None
            if found:
                return found
    for meta in [p / "METADATA" for p in _glob(r.parent, "sglang-*.dist-info")]:
        found = metadata_version(meta)
        if found:
            return found
    notes.append("version not found")
    return None


def _str_assignment(tree: ast.Module, name: str) -> str | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if name in targets and isinstance(node.value.value, str):
                return node.value.value
    return None


def _declared_env(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Fields of ``class Envs`` (``NAME = EnvXxx(...)``), and names still honoured with a warning:
    ``deprecated_name=`` aliases and the ``_DEPRECATED_ENVS`` registry."""
    fields: set[str] = set()
    aliases: set[str] = set()
    envs = _find_class(tree, "Envs")
    for node in envs.body if envs else []:
        target, value = _assign_parts(node)
        if target and isinstance(value, ast.Call) and _call_name(value).startswith("Env"):
            fields.add(target)
            for kw in value.keywords:
                if kw.arg == "deprecated_name" and isinstance(kw.value, ast.Constant):
                    aliases.add(str(kw.value.value))
    for node in tree.body:
        target, value = _assign_parts(node)
        if target == "_DEPRECATED_ENVS" and isinstance(value, ast.Dict):
            aliases |= {
                k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
    return fields, aliases


def _assign_parts(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return None, None


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _draft_share_hook(
    models: Path, notes: list[str], attrs: list[str], sets: dict[str, list[str]]
) -> dict[str, bool | None]:
    """Each top-level class of the draft model files -> whether it defines ``set_lm_head_from_target`` itself
    (None: its file does not parse); the first definition wins, as SGLang's registry. ``sets`` receives the
    classes giving one of ``attrs`` a value."""
    try:
        names = sorted(
            n for n in names_in(models) if n.endswith(".py") and any(w in n for w in DRAFT_MODEL_FILES)
        )
    except (InputError, OSError):
        return {}
    found: dict[str, bool | None] = {}
    for name in names:
        path = models / name
        try:
            data = read_head(path, _SOURCE_CAP)  # never blocks on a FIFO nor reads /dev/zero for ever
        except OSError:
            continue
        names_here = (m.decode() for m in _CLASS_LINE.findall(data))
        classes: dict[str, bool | None] = dict.fromkeys(names_here, False)
        assigns = any(f"self.{a} =".encode() in data for a in attrs)
        if SHARE_HOOK.encode() in data or assigns:
            tree = _parse(path, notes)
            if tree is None:
                classes = dict.fromkeys(classes)
            else:
                defined = [n for n in tree.body if isinstance(n, ast.ClassDef)]
                classes = {n.name: SHARE_HOOK in _class_members(n) for n in defined}
                for n in defined if assigns else []:
                    given = sorted(_self_assigned(n, attrs))
                    if given:
                        sets.setdefault(n.name, given)
        for cls, shares in classes.items():
            found.setdefault(cls, shares)
    return found


def _self_assigned(node: ast.AST, attrs: list[str]) -> set[str]:
    """Which of ``attrs`` code under ``node`` assigns ``self.<attr>`` a value other than ``None``."""
    found: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Assign) and not (isinstance(n.value, ast.Constant) and n.value.value is None):
            for t in n.targets:
                if isinstance(t, ast.Attribute) and t.attr in attrs and _is_self(t.value):
                    found.add(t.attr)
    return found


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


_METHOD = re.compile(rb"^    (?:async )?def \w+", re.MULTILINE)


def _methods(data: bytes) -> list[bytes]:
    """A worker file cut at its methods (4-space ``def`` lines): each piece parses alone once dedented,
    so only the methods that mention what is looked for are parsed, never the whole file."""
    starts = [m.start() for m in _METHOD.finditer(data)]
    return [data[a:b] for a, b in zip(starts, [*starts[1:], len(data)], strict=True)]


def _parse_method(piece: bytes) -> ast.Module | None:
    text = piece.decode("utf-8", "replace")
    # cut where the class ends: the first line back at column 0 (a top-level statement after the class)
    lines = text.splitlines(keepends=True)
    end = next((i for i, line in enumerate(lines[1:], 1) if line[:1] not in ("", " ", "\t", "\n", "#")), None)
    try:
        return ast.parse(textwrap.dedent("".join(lines[:end])))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def read_share_guard(speculative: Path, notes: list[str]) -> tuple[dict[str, list[str]], list[str]] | None:
    """Where the build hands the draft the target's LM-head module and what makes it skip that, from the
    condition around ``set_lm_head_from_target`` (0.5.23: ``eagle_worker_v2.py`` ``init_lm_head``), worker
    attributes followed to what assigns them: ``(server argument -> algorithms ignoring it, draft
    attributes)``, or None when no file calls it or the condition does not parse."""
    try:
        names = sorted(n for n in names_in(speculative) if n.endswith(".py"))
    except (InputError, OSError):
        return None
    args: dict[str, list[str]] = {}
    draft: list[str] = []
    called = False
    for name in names:
        try:
            data = read_head(speculative / name, _SOURCE_CAP)
        except OSError:
            continue
        if SHARE_HOOK.encode() not in data:
            continue
        pieces = _methods(data)
        worker_attrs: list[str] = []
        for piece in pieces:
            if SHARE_HOOK.encode() not in piece:
                continue
            tree = _parse_method(piece)
            if tree is None:
                notes.append(f"srt/speculative/{name}: the {SHARE_HOOK} call does not parse")
                return None
            for cond in _guards_of_call(tree, SHARE_HOOK):
                called = True
                for attr, on_draft in _none_tests(cond):
                    (draft if on_draft else worker_attrs).append(attr)
        for attr in dict.fromkeys(worker_attrs):
            for piece in pieces:
                if f"self.{attr} =".encode() not in piece:
                    continue
                tree = _parse_method(piece)
                for dest, unless in _assigned_from(tree, attr) if tree is not None else []:
                    args.setdefault(dest, unless)
    if not called:
        return None
    return args, sorted(set(draft))


def _guards_of_call(tree: ast.AST, hook: str) -> list[ast.expr]:
    """The tests of the ``if`` statements whose body calls ``<x>.hook(...)``."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            calls = any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == hook
                for stmt in node.body
                for c in ast.walk(stmt)
            )
            if calls:
                found.append(node.test)
    return found


def _none_tests(test: ast.expr) -> list[tuple[str, bool]]:
    """The ``X is None`` parts of a condition: ``self.a`` -> (a, False), ``getattr(m, "b", None)`` ->
    (b, True: an attribute of the draft model)."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    found: list[tuple[str, bool]] = []
    for part in parts:
        if not (
            isinstance(part, ast.Compare)
            and len(part.ops) == 1
            and isinstance(part.ops[0], ast.Is)
            and isinstance(part.comparators[0], ast.Constant)
            and part.comparators[0].value is None
        ):
            continue
        left = part.left
        if isinstance(left, ast.Attribute) and _is_self(left.value):
            found.append((left.attr, False))
        elif (
            isinstance(left, ast.Call)
            and isinstance(left.func, ast.Name)
            and left.func.id == "getattr"
            and len(left.args) >= 2
            and isinstance(left.args[1], ast.Constant)
            and isinstance(left.args[1].value, str)
        ):
            found.append((left.args[1].value, True))
    return found


def _assigned_from(tree: ast.AST, attr: str) -> list[tuple[str, list[str]]]:
    """The server arguments (``speculative_*`` attributes) whose value ``self.<attr>`` is assigned from,
    each with the algorithms of the ``if ...is_<algo>()`` branches before it (where it is not)."""
    found: list[tuple[str, list[str]]] = []

    def visit(stmts: list[ast.stmt], unless: list[str]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                visit(stmt.body, unless)
                visit(stmt.orelse, [*unless, *_algorithms(stmt.test)])
            elif isinstance(stmt, ast.Assign) and _self_assigned(stmt, [attr]):
                for n in ast.walk(stmt.value):
                    if isinstance(n, ast.Attribute) and n.attr.startswith("speculative_"):
                        found.append((n.attr, sorted(set(unless))))
            else:
                for field_name in ("body", "orelse", "finalbody"):
                    inner = getattr(stmt, field_name, None)
                    if isinstance(inner, list):
                        visit(inner, unless)

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit(node.body, [])
    return found


def _algorithms(test: ast.expr) -> list[str]:
    """``self.speculative_algorithm.is_eagle3()`` -> ``["EAGLE3"]``."""
    return [
        n.func.attr[3:].upper()
        for n in ast.walk(test)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.startswith("is_")
    ]


def _find_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _class_members(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        else:
            target, _ = _assign_parts(node)
            if target:
                names.add(target)
    return names


def _moe_choices(r: Path, notes: list[str]) -> list[str] | None:
    """``MOE_RUNNER_BACKEND_CHOICES``: srt/arg_groups/choices.py in 0.5.23, server_args.py before."""
    for rel in ("srt/arg_groups/choices.py", "srt/server_args.py"):
        path = r / rel
        if not _is_file(path):
            continue
        tree = _parse(path, notes)
        if tree is None:
            continue
        for node in tree.body:
            target, value = _assign_parts(node)
            if target == CHOICES_NAME and isinstance(value, (ast.List, ast.Tuple)):
                return [
                    e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
    notes.append(f"{CHOICES_NAME} not found")
    return None


def referenced_env(root: Path, names: set[str]) -> set[str] | None:
    """Which of ``names`` appear anywhere in the package's source. Many SGLang modules read variables
    with ``os.environ`` directly instead of declaring them in ``srt/environ.py``; a name found nowhere is
    really ignored. Reads every file, so callers ask only for names environ.py lacks; None where the tree
    was not read whole (past ``read_below``'s limits): a name not found may be in what was left."""
    wanted = {n.encode() for n in names}
    found: set[str] = set()

    def named(data: bytes) -> set[bytes]:
        return {n for n in wanted if n in data} if b"SGLANG_" in data else set()

    below = read_below(root, ".py", _SOURCE_CAP, named)  # each file read once, from its directory
    for _path, seen in below:
        if not isinstance(seen, OSError):
            found |= {n.decode() for n in seen}
    return None if below.cut else found
