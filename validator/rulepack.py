"""Rule packs: the expectations and checks of one deployment recipe, as YAML a user can copy and edit.

The pack is the only source of truth for a recipe (kube-bench style): expectations, severities, why, remedy
texts and waivers; simple ``expect`` checks over any fact need no Python. Texts are templates over the
expectations and the check's fields, plain names, never evaluated. Loading validates the whole file
(``pack_schema``, then ``pack_lint``) and maps every problem to a YAML line for ``rules lint``.
"""

from __future__ import annotations

import re
import stat
import sys
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from validator.bounded_files import read_head, read_text_bounded
from validator.errors import InputError
from validator.pack_lint import lint_pack
from validator.pack_schema import RulePack
from validator.trusted_files import UnsafeLocation, creatable_by_others, kind, read_trusted_file
from validator.validation import Problem, ValidationError, format_loc, load, problems

DEFAULT_PACK = "ling-3.0-flash-dgx-spark"


class LoadedPack:
    """A validated pack and where it came from (its directory resolves relative data files), with the
    data files it names found once, at load: ``probe_prompts`` is the file the probe reads (None when the
    pack has no probe), so a job is handed the path instead of asking the loader for it."""

    def __init__(self, pack: RulePack, path: Path) -> None:
        self.pack = pack
        self.path = path
        self.probe_prompts = self.data_file(pack.probe.prompts) if pack.probe is not None else None

    @property
    def name(self) -> str:
        return self.pack.metadata.name

    def data_file(self, relative: str) -> Path:
        """A file the pack names, beside the pack's real file (a pack reached through a link finds its
        data where the file is). The file's own path is not resolved: the trusted reader walks it (links
        included) and judges every directory on the way, a link's own directory among them."""
        return self.path.resolve().parent / relative


def builtin_packs_dir() -> Path:
    """The built-in packs: package data in ``validator/data/rules`` (real files, so that every build of the
    package carries them: a wheel, an sdist, the container image's build context). ``rules/`` at the top
    of a checkout is a link to this directory, for editing and ``--rules rules/NAME.yaml``."""
    return Path(__file__).resolve().parent / "data" / "rules"


def list_builtin_packs() -> list[Path]:
    return sorted(p for p in builtin_packs_dir().glob("*.yaml") if _looks_like_pack(p))


def pack_candidates(dirs: Sequence[Path] = ()) -> list[Path]:
    """What ``--rules auto`` chooses among: the built-in packs, then the packs in each directory the
    operator named (``--rules-dir``), never the current directory. Each file found there is read as any
    pack named by path (only through directories nobody else can write)."""
    found = list_builtin_packs()
    for d in dirs:
        # judged before anything in it is looked at: a file of anyone else's there would be refused when
        # read, and a stat, listing or head read through a link of theirs would tell them what it points at
        try:
            problems = creatable_by_others(d / "x.yaml", ())
        except UnsafeLocation as exc:
            problems = [str(exc)]
        if problems:
            raise InputError(str(d), f"--rules-dir: {problems[-1]}: anyone could put a pack there")
        try:
            is_dir = stat.S_ISDIR(d.stat().st_mode)
        except (FileNotFoundError, NotADirectoryError):
            is_dir = False
        except OSError as exc:
            raise InputError(str(d), f"--rules-dir: {exc.strerror or exc}") from None
        if not is_dir:
            raise InputError(str(d), "--rules-dir: not a directory")
        try:
            entries = sorted(p for p in d.iterdir() if p.suffix in (".yaml", ".yml"))
        except OSError as exc:
            raise InputError(str(d), f"--rules-dir: cannot list: {exc.strerror or exc}") from None
        for p in entries:
            try:
                st = p.stat()
            except OSError as exc:
                raise InputError(str(p), f"--rules-dir: cannot read: {exc.strerror or exc}") from None
            if not stat.S_ISREG(st.st_mode):  # a FIFO would block the first read for ever
                raise InputError(str(p), f"--rules-dir: {kind(st.st_mode)}, not a rule pack file")
            if _looks_like_pack(p):
                found.append(p)
    return found


def _looks_like_pack(path: Path) -> bool:
    """Whether the file's beginning declares a rule pack (never blocks: a FIFO or a device is refused)."""
    try:
        head = read_head(path, 8192).decode("utf-8", errors="replace")
    except OSError:
        return False
    return "\nkind: RulePack" in head


def _is_file(path: Path, where: str, what: str) -> bool:
    """``path.is_file()``, except that an error other than absence (a name over the kernel's limit, a
    permission) is an ``InputError`` naming ``where`` instead of an internal error."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise InputError(where, f"{what}: {exc.strerror or exc}") from None


def names_a_file(ref: str) -> bool:
    """A pack reference names a file when it is a path: it contains a ``/`` or ends in ``.yaml``/``.yml``.
    Anything else is a built-in pack's name, whatever the current directory holds."""
    return "/" in ref or ref.endswith((".yaml", ".yml"))


def resolve_pack_path(name_or_path: str | None) -> Path:
    """``--rules NAME|PATH``: a file when ``ref`` is a path (:func:`names_a_file`), else a built-in pack,
    never one of the current directory (a shared one would let whoever can write it choose the pack). A
    path is not looked at here: stat() would follow a link a second user planted and tell, by 'not found',
    whether what it points at exists."""
    ref = name_or_path or DEFAULT_PACK
    if names_a_file(ref):  # never stat'ed here: the trusted read says whether it is there, walking safely
        return Path(ref)
    builtin = builtin_packs_dir() / f"{ref}.yaml"
    if not _is_file(builtin, ref, "rule pack"):
        names = ", ".join(p.stem for p in list_builtin_packs()) or "none"
        raise InputError(ref, f"no built-in rule pack of that name (built-in: {names})")
    return builtin


def load_pack(name_or_path: str | None = None) -> LoadedPack:
    """The pack named, parsed. A path is made absolute but not resolved: resolving it first would follow a
    symbolic link planted in a directory anyone can write to a trusted file of the planter's choosing,
    and judge only the target's directories."""
    path = resolve_pack_path(name_or_path)
    return _load_pack_cached(path.absolute())


@lru_cache(maxsize=8)
def _load_pack_cached(path: Path) -> LoadedPack:
    return LoadedPack(parse_pack(path), path)


PACK_CAP = 1024 * 1024  # a real pack is about 10 KB


class PackError(InputError):
    """A rule pack with one or more problems; each is ``(line, field, message)`` (``field`` the location in
    the pack, ``checks[3].severity``). The exception's own message is the first problem (one line for any
    command); ``rules lint`` prints them all."""

    def __init__(self, path: str, problems: list[tuple[int | None, str, str]]) -> None:
        line, field, first = problems[0]
        more = (
            f" (and {len(problems) - 1} more: spark-validate rules lint {path})" if len(problems) > 1 else ""
        )
        super().__init__(path, first + more, line, field=field)
        self.problems = problems

    def lines(self) -> list[str]:
        return [
            f"{self.where}:{line}: {field}: {msg}" if line else f"{self.where}: {field}: {msg}"
            for line, field, msg in self.problems
        ]


EXTENDS_DEPTH = 4  # a site pack over a recipe pack over a base pack is three; more is a loop or a mistake


def is_builtin_path(path: Path) -> bool:
    """Whether ``path``, as written (made absolute, never resolved), is a file of the built-in pack
    directory. A link elsewhere that points there is not: the directory holding the link is judged like any
    other, or whoever can write it would choose which built-in pack applies."""
    return path.absolute().parent == builtin_packs_dir()


def _pack_text(path: Path) -> str:
    """A pack's text. A built-in pack is package data; any other is read only when it and every directory
    above it belong to root or the reading user and nobody else can write them (``trusted_files``)."""
    if is_builtin_path(path):
        return read_text_bounded(builtin_packs_dir() / path.name, PACK_CAP, "rule pack")
    try:
        data = read_trusted_file(path, PACK_CAP, what="rule pack")
    except FileNotFoundError:
        raise InputError(str(path), "rule pack file not found") from None
    except UnsafeLocation as exc:
        raise InputError(str(path), str(exc).removeprefix(f"{path}: ")) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(str(path), f"rule pack is not valid UTF-8 (byte {exc.start})", line) from None


_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"
_DECIMAL_INT_RE = re.compile(r"[-+]?[0-9][0-9_]*")


def _long_integer(plain: str) -> int:
    """The digit count of a plain scalar YAML reads as a decimal integer longer than Python converts
    (``sys.get_int_max_str_digits``), else 0: said at its line, not as Python's advice to a programmer."""
    limit = sys.get_int_max_str_digits()
    if not limit or len(plain) <= limit or not _DECIMAL_INT_RE.fullmatch(plain):
        return 0
    digits = sum(c.isdigit() for c in plain)
    return digits if digits > limit else 0


def _read_yaml(path: Path) -> tuple[str, dict[str, Any]]:
    """One pack file's text and its YAML mapping, with every problem as an ``InputError`` naming it."""
    import yaml

    from validator.yaml_safe import FastSafeLoader

    where = str(path)
    text = _pack_text(path)
    loader = FastSafeLoader  # libyaml when present
    try:
        # Aliases first, from the event stream: a pack has no use for them, and a few lines of nested
        # aliases ("billion laughs") expand to gigabytes once validated. A key given twice in one mapping
        # too: YAML keeps the later one without a word (a second `waivers:` would drop the first's).
        open_: list[tuple[set[str] | None, list[bool]]] = []  # per collection: its keys, next is a key
        for event in yaml.parse(text, Loader=loader):
            line = event.start_mark.line + 1 if event.start_mark is not None else None
            if isinstance(event, yaml.AliasEvent):
                raise InputError(where, "YAML aliases (*name) are not allowed in a rule pack", line)
            keys, is_key = open_[-1] if open_ else (None, [False])
            if isinstance(event, yaml.NodeEvent) and keys is not None:
                if is_key[0] and isinstance(event, yaml.ScalarEvent):
                    if event.tag == _MERGE_TAG or (
                        event.value == "<<" and event.tag is None and event.implicit[0]
                    ):
                        # a second way to give a key (the explicit one wins without a word)
                        raise InputError(where, "YAML merge keys (<<) are not allowed in a rule pack", line)
                    if event.value in keys:
                        raise InputError(where, f"key {event.value[:60]!r} given twice in one mapping", line)
                    keys.add(event.value)
                is_key[0] = not is_key[0]
            if isinstance(event, yaml.ScalarEvent) and (
                event.tag == _INT_TAG or (event.tag is None and not event.style and event.implicit[0])
            ):
                digits = _long_integer(event.value)
                if digits:
                    raise InputError(
                        where, f"an integer of {digits} digits (at most {sys.get_int_max_str_digits()})", line
                    )
            if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                open_.append((set() if isinstance(event, yaml.MappingStartEvent) else None, [True]))
            elif isinstance(event, yaml.CollectionEndEvent):
                open_.pop()
        data = yaml.load(text, Loader=loader)  # a safe loader (CSafeLoader or SafeLoader)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
        raise InputError(where, f"invalid YAML: {exc.problem}", line) from None
    except yaml.YAMLError as exc:
        raise InputError(where, f"invalid YAML: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer over Python's digit limit, absurd nesting
        raise InputError(where, f"invalid value in YAML: {str(exc).splitlines()[0][:200]}") from None
    if not isinstance(data, dict):
        raise InputError(where, "a rule pack must be a YAML mapping", 1)
    return text, data


def _extended_path(child: Path, ref: object) -> Path:
    """``extends: NAME`` is a built-in pack; ``extends: PATH`` (a ``/`` or a ``.yaml`` suffix) is a
    file beside the extending pack."""
    if not isinstance(ref, str) or not ref:
        raise InputError(str(child), "extends: must name a pack (a built-in name or a path)")
    if names_a_file(ref):
        # beside the extending pack's real file; the target itself is walked and judged when it is read
        target = child.resolve().parent / ref
        if not _is_file(target, str(child), "extends"):
            raise InputError(str(child), f"extends: {ref}: no such pack file")
        return target
    builtin = builtin_packs_dir() / f"{ref}.yaml"
    if not _is_file(builtin, str(child), "extends"):
        raise InputError(str(child), f"extends: {ref}: no built-in rule pack of that name")
    return builtin


def _merge_mapping(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on ``base``: mappings merge key by key, anything else replaces; ``null`` removes a key."""
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge_mapping(out[key], value)
        else:
            out[key] = value
    return out


def _merge_checks(base: list[Any], over: list[Any], drop: list[Any], where: str) -> list[Any]:
    """Checks by ``id``: an entry naming a check of the base is merged over it in its place, a new id is
    added after the check its ``after:`` names (else after the base's checks), and ``drop_checks`` removes
    base checks by id."""
    ids = [c.get("id") if isinstance(c, dict) else None for c in base]
    out = list(base)
    for check_id in drop:
        if check_id not in ids:
            raise InputError(where, f"drop_checks: {check_id!r} is not a check of the extended pack")
        out[ids.index(check_id)] = None
    for entry in over:
        check_id = entry.get("id") if isinstance(entry, dict) else None
        if check_id is not None and check_id in ids and out[ids.index(check_id)] is not None:
            i = ids.index(check_id)
            out[i] = _merge_mapping(out[i], entry)
            continue
        after = entry.pop("after", None) if isinstance(entry, dict) else None
        if after is None:
            out.append(entry)
            ids.append(check_id)
            continue
        placed = [c.get("id") if isinstance(c, dict) else None for c in out]
        if after not in placed or out[placed.index(after)] is None:
            raise InputError(where, f"checks: {check_id}: after: {after!r} is not a check of the pack")
        out.insert(placed.index(after) + 1, entry)
        ids.insert(placed.index(after) + 1, check_id)
    return [c for c in out if c is not None]


def _anchor_files(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The files a pack names (``probe.prompts``), made absolute against that pack's own real directory
    before another pack extends it: a site pack in ``/srv`` over a built-in recipe keeps the built-in
    prompts, and a prompt file the site pack names itself stays beside the site pack."""
    probe = data.get("probe")
    if not isinstance(probe, dict):
        return data
    prompts = probe.get("prompts")
    if not isinstance(prompts, str) or not prompts or Path(prompts).is_absolute():
        return data
    return {**data, "probe": {**probe, "prompts": str(path.resolve().parent / prompts)}}


def with_extends(path: Path, data: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """A pack's YAML mapping with every ``extends:`` applied: what the schema validates."""
    where = str(path)
    if "extends" not in data and "drop_checks" not in data:
        return data
    if depth >= EXTENDS_DEPTH:
        raise InputError(where, f"extends: more than {EXTENDS_DEPTH} packs deep (a loop?)")
    parent = _extended_path(path, data.get("extends"))
    base = _anchor_files(parent, with_extends(parent, _read_yaml(parent)[1], depth + 1))
    over = {k: v for k, v in data.items() if k not in ("extends", "drop_checks", "checks")}
    merged = _merge_mapping(base, over)
    drop = data.get("drop_checks") or []
    checks = data.get("checks") or []
    if not isinstance(drop, list) or not isinstance(checks, list):
        raise InputError(where, "checks and drop_checks must be lists")
    base_checks = base.get("checks") or []
    if not isinstance(base_checks, list):
        raise InputError(str(parent), "checks must be a list")
    merged["checks"] = _merge_checks(list(base_checks), checks, drop, where)
    return merged


def extended_pack(path: Path) -> RulePack | None:
    """The pack that the pack at ``path`` names in ``extends:``, parsed (None when it extends none)."""
    _, raw = _read_yaml(path)
    if "extends" not in raw:
        return None
    return parse_pack(_extended_path(path, raw["extends"]))


def parse_pack(path: Path) -> RulePack:
    """Parse and validate one pack file (with the packs it ``extends:``): the schema, then what the
    listed builtin checks need from it (expectations, remedy variants, modes) and every message
    template. All problems are reported together as a ``PackError`` (exit 65), each with its line in
    the file named (a problem in what an extended pack gave points at the nearest line there is)."""
    import yaml

    where = str(path)
    text, raw = _read_yaml(path)
    data = with_extends(path, raw)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    node = None

    def line_of(loc: tuple[Any, ...]) -> int | None:
        nonlocal node
        if node is None:
            node = yaml.compose(text, Loader=loader)  # positions, only needed to report an error
        return _line_of(node, loc)

    merged = data.get("checks")
    merged_checks: list[Any] = merged if isinstance(merged, list) else []
    own = raw.get("checks")
    own_checks: list[Any] | None = (own if isinstance(own, list) else []) if "extends" in raw else None

    def located(loc: tuple[Any, ...], msg: str) -> tuple[int | None, str, str]:
        """A problem at ``loc`` of the merged pack, said in the author's file: a check of an extending
        pack is found by its id among the file's own entries (merged positions mean nothing there), or
        named by id (a check the file inherits; the line is its ``extends:``)."""
        if own_checks is not None and len(loc) >= 2 and loc[0] == "checks" and isinstance(loc[1], int):
            entry = merged_checks[loc[1]] if loc[1] < len(merged_checks) else None
            check_id = entry.get("id") if isinstance(entry, dict) else None
            ids = [c.get("id") if isinstance(c, dict) else None for c in own_checks]
            rest = format_loc(("x", *loc[2:]))[1:]
            if check_id is not None and check_id in ids:
                mine = ("checks", ids.index(check_id), *loc[2:])
                return line_of(mine), f"checks[{check_id}]{rest}", msg
            if check_id is not None:
                return line_of(("extends",)), f"checks[{check_id}]{rest} (from the extended pack)", msg
        return line_of(loc), format_loc(loc) or "pack", msg

    try:
        pack = load(RulePack, data)
    except ValidationError as exc:
        found = problems(exc)
        # Every problem, not only the first stage's: with the malformed checks set aside, the rest of the
        # pack is linted too (an author fixing one stage should not meet the next one after)
        found += _lint_without(data, found)
        raise PackError(where, [located(loc, msg) for loc, msg in found]) from None
    found = lint_pack(pack)
    if found:
        raise PackError(where, [located(loc, msg) for loc, msg in found])
    return pack


def _lint_without(data: dict[str, Any], refused: Sequence[Problem]) -> list[Problem]:
    """``lint_pack``'s problems of ``data`` with the checks the schema refused left out (located in
    ``data``'s own positions); none when the schema refused anything but checks."""
    bad = {loc[1] for loc, _ in refused if len(loc) >= 2 and loc[0] == "checks" and isinstance(loc[1], int)}
    if not bad or any(len(loc) < 2 or loc[0] != "checks" for loc, _ in refused):
        return []
    checks = data.get("checks")
    if not isinstance(checks, list):
        return []
    kept = [i for i in range(len(checks)) if i not in bad]
    try:
        pack = load(RulePack, {**data, "checks": [checks[i] for i in kept]})
    except ValidationError:
        return []
    out = []
    for loc, msg in lint_pack(pack):
        if len(loc) >= 2 and loc[0] == "checks" and isinstance(loc[1], int) and loc[1] < len(kept):
            loc = ("checks", kept[loc[1]], *loc[2:])
        out.append((loc, msg))
    return out


def _line_of(node: Any, loc: tuple[Any, ...]) -> int | None:
    """Walk the composed YAML node tree along a problem's location to the nearest line."""
    import yaml

    if node is None:
        return None
    best: int = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for key, value in node.value:
                if key.value == part:
                    nxt = value
                    best = key.start_mark.line + 1
                    break
            if nxt is None:
                return best
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return best
            node = node.value[part]
            best = node.start_mark.line + 1
        else:
            return best
    return node.start_mark.line + 1 if node is not None else best
