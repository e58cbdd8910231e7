"""Config abuse guards: hostile YAML files, flags that would move the retained service, names unfit for paths.

Pipeline position: next to :mod:`orchestrator.config.validate`. :func:`yaml_file_problems` runs before Hydra
composes anything (an anchor bomb expands to millions of nodes inside OmegaConf and never returns);
:func:`abuse_problems` runs inside :func:`orchestrator.config.validate.validate`, before any launch spec is
rendered. Every problem names its file and field; nothing starts. Free of Hydra, pure apart from reading
the YAML files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from contracts.errors import ConfigError, ConfigProblem
from contracts.paths import CONF_DIR
from contracts.schema import GauntletConfig

#: A config file larger than this is refused before it is parsed (the shipped ones are under 4 KiB).
MAX_YAML_BYTES = 256 * 1024
#: A config file whose aliases expand to more nodes than this is refused (an anchor bomb).
MAX_YAML_NODES = 50_000
#: vLLM flags that decide where the retained service listens, which model it serves and who may call it:
#: gauntlet renders them from ``service.*`` and they may not be set through extra_args or sim_args.
SERVICE_FLAGS = (
    "model",
    "served-model-name",
    "host",
    "port",
    "uds",
    "api-key",
    "config",
    "root-path",
    "ssl-keyfile",
    "ssl-certfile",
)
FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*(\.[a-z0-9_-]+)*$")
NUMBER = re.compile(r"^-\d+(\.\d+)?([eE][-+]?\d+)?$")
#: Names that become directory names (workload profiles; candidates are checked by validate).
PATH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

Where = Callable[[Sequence[str]], str]


# --------------------------------------------------------------------------- YAML files, before Hydra


def yaml_file_problems(roots: Iterable[Path]) -> list[ConfigProblem]:
    """Problems of every ``*.yaml`` under ``roots``: too large, unparsable bombs, alias expansion too big."""
    out: list[ConfigProblem] = []
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.yaml")):
            problem = _yaml_problem(path)
            if problem is not None:
                out.append(problem)
    return out


class YamlReads:
    """Each config file checked and read once: a command that composes many candidates (``plan``) checks
    the files they share once, not once per candidate. What a file said when first read is what counts."""

    def __init__(self) -> None:
        self._problems: dict[Path, ConfigProblem | None] = {}
        self._text: dict[Path, str] = {}
        self._raw: dict[Path, Any] = {}

    def problem(self, path: Path) -> ConfigProblem | None:
        """Why ``path`` may not be read (:func:`_yaml_problem`), or None."""
        if path not in self._problems:
            self._problems[path] = _yaml_problem(path)
        return self._problems[path]

    def text(self, path: Path) -> str:
        """The text of ``path``."""
        if path not in self._text:
            self._text[path] = path.read_text(errors="replace")
        return self._text[path]

    def raw(self, path: Path) -> Any:
        """``path`` as ``yaml.safe_load`` reads it (None where it does not parse)."""
        if path not in self._raw:
            try:
                self._raw[path] = yaml.safe_load(self.text(path))
            except yaml.YAMLError:
                self._raw[path] = None
        return self._raw[path]


def check_yaml_files(
    roots: Iterable[Path],
    argv: Sequence[str] | None = None,
    *,
    config_name: str = "config",
    reads: YamlReads | None = None,
) -> None:
    """Raise ConfigError before composition when a config file it may read is hostile: with ``argv`` (the
    command's overrides and flags) only the files a composition of them may read
    (:func:`used_yaml_files`), so one oversized candidate in a ``--config-dir`` blocks the commands that
    select it, not every command; without, every file under ``roots``. ``reads`` keeps what was read for
    the next call (one per candidate of a plan)."""
    roots = list(roots)
    if argv is None:
        problems = yaml_file_problems(roots)
    else:
        reads = reads or YamlReads()
        used = used_yaml_files(roots, argv, config_name=config_name, reads=reads)
        problems = [p for path in sorted(used) if (p := reads.problem(path)) is not None]
    if problems:
        raise ConfigError(problems)


_OPTIONS = re.compile(r"^[\w.\-/]+(,[\w.\-/]+)*$")


def used_yaml_files(
    roots: Sequence[Path], argv: Sequence[str], *, config_name: str = "config", reads: YamlReads | None = None
) -> set[Path]:
    """The config files a composition of ``argv`` may read (Hydra reads a file whole when its defaults
    tree names it): the primary config, each group option a read file's ``defaults`` names (recursively),
    and each option the command line selects (``group=a,b``, ``group@pkg=a``, ``+group=a``). Where the
    selection is not a plain option (an interpolation, ``glob(...)``, ``choice(...)``), every option of
    that group counts: this errs towards reading, never towards a hostile file composed unchecked. A file
    with a problem is kept in the set but not read further."""
    reads = reads or YamlReads()
    chosen, overridden = _argv_choices(argv, roots)
    used: set[Path] = set()
    queue: list[tuple[Path, str]] = [(root / f"{_name_of(argv, config_name)}.yaml", "") for root in roots]
    for group, options in chosen:
        queue += [(path, group) for path in _option_files(roots, group, options)]
    while queue:
        path, group = queue.pop()
        if path in used or not path.is_file():
            continue
        used.add(path)
        if reads.problem(path) is not None:
            continue  # refused as it is; its defaults are not read
        raw = reads.raw(path)
        defaults = raw.get("defaults") if isinstance(raw, dict) else None
        for entry in defaults if isinstance(defaults, list) else []:
            for target, options in _default_choices(entry, group, primary=not group, overridden=overridden):
                queue += [(p, target) for p in _option_files(roots, target, options)]
    return used


def _name_of(argv: Sequence[str], default: str) -> str:
    for index, arg in enumerate(argv):
        if arg in ("-cn", "--config-name") and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--config-name="):
            return arg.split("=", 1)[1]
    return default


def _argv_choices(
    argv: Sequence[str], roots: Sequence[Path]
) -> tuple[list[tuple[str, list[str] | None]], set[str]]:
    """The groups the command line selects, with their options (None: any), and the ``group@pkg`` keys it
    sets (their defaults in the primary config are replaced)."""
    chosen: list[tuple[str, list[str] | None]] = []
    overridden: set[str] = set()
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue  # a flag, or a flag's value (a path, a name): an override has '=' (a path with one
            # is read as an override of no group, and ignored)
        key, value = arg.split("=", 1)
        if key.startswith("~"):
            continue
        key = key.lstrip("+")
        group = key.split("@", 1)[0]
        if not any((root / group).is_dir() for root in roots):
            continue  # a value, not a group (run.repeats=1)
        overridden.add(key)
        chosen.append((group, value.split(",") if _OPTIONS.match(value) else None))
    return chosen, overridden


def _default_choices(
    entry: object, group: str, *, primary: bool, overridden: set[str]
) -> list[tuple[str, list[str] | None]]:
    """What one ``defaults`` entry of a file in ``group`` selects: (group, options; None: any)."""
    if isinstance(entry, str):
        if entry == "_self_":
            return []
        name = entry.removeprefix("optional ").split("@", 1)[0]
        where = name.lstrip("/") if name.startswith("/") else f"{group}/{name}".lstrip("/")
        target, _, option = where.rpartition("/")
        return [(target, None if "${" in option else [option])]
    if not isinstance(entry, dict) or len(entry) != 1:
        return []
    ((raw_key, value),) = entry.items()
    key = str(raw_key)
    overriding = key.startswith("override ")
    key = key.removeprefix("override ").removeprefix("optional ").strip()
    if primary and not overriding and key in overridden:
        return []  # the command line chose this package's option instead
    name = key.split("@", 1)[0]
    target = name.lstrip("/") if name.startswith("/") or not group else f"{group}/{name}"
    if value is None:
        return []
    values = value if isinstance(value, list) else [value]
    if any(not isinstance(v, str) or "${" in v for v in values):
        return [(target, None)]
    return [(target, [str(v) for v in values])]


def _option_files(roots: Sequence[Path], group: str, options: list[str] | None) -> list[Path]:
    folders = [root / group for root in roots if (root / group).is_dir()] if group else list(roots)
    if options is None:
        return [path for folder in folders for path in sorted(folder.glob("*.yaml"))]
    return [folder / f"{option}.yaml" for folder in folders for option in options]


def _yaml_problem(path: Path) -> ConfigProblem | None:
    size = path.stat().st_size
    if size > MAX_YAML_BYTES:
        return ConfigProblem(
            str(path), "<file>", f"{size} bytes", f"a config file of at most {MAX_YAML_BYTES} bytes"
        )
    try:
        node = yaml.compose(path.read_text(errors="replace"), Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:  # Hydra would report the file's keys as missing ("name = None")
        return syntax_problem(path, exc)
    nodes = expanded_nodes(node, limit=MAX_YAML_NODES)
    if nodes > MAX_YAML_NODES:
        return ConfigProblem(
            str(path),
            "<anchors>",
            f"aliases expand to more than {MAX_YAML_NODES} nodes",
            "a config without alias bombs (write the values out, or use Hydra's defaults and interpolation)",
        )
    return None


def syntax_problem(path: Path, exc: yaml.YAMLError) -> ConfigProblem:
    """A YAML syntax error as ``file:line:column`` (1-based, as editors count) and what the parser
    expected, with where the construct it was reading began."""
    mark = getattr(exc, "problem_mark", None)
    begun = getattr(exc, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    said = str(getattr(exc, "problem", None) or str(exc).splitlines()[0])
    context = getattr(exc, "context", None)
    if context and begun is not None:
        said += f" ({context} begun at line {begun.line + 1}, column {begun.column + 1})"
    return ConfigProblem(where, "<syntax>", said, "valid YAML (nothing in this file was read)")


def expanded_nodes(node: yaml.Node | None, *, limit: int) -> int:
    """How many nodes ``node`` becomes once every alias is expanded (counting stops past ``limit``)."""
    sizes: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        known = sizes.get(id(n))
        if known is not None:
            return known
        sizes[id(n)] = limit + 1  # a cycle counts as too large
        total = 1
        if isinstance(n, yaml.SequenceNode):
            children: list[yaml.Node] = list(n.value)
        elif isinstance(n, yaml.MappingNode):
            children = [part for pair in n.value for part in pair]
        else:
            children = []
        for child in children:
            total += size(child)
            if total > limit:
                break
        sizes[id(n)] = total = min(total, limit + 1)
        return total

    return 0 if node is None else size(node)


def config_roots(argv: Sequence[str], primary: Path = CONF_DIR) -> list[Path]:
    """The directories Hydra will read configs from: ``primary``, ``--config-dir``/``-cd`` and the
    ``file://`` entries of a ``hydra.searchpath`` override (relative ones from the working directory)."""
    roots = [primary]
    for index, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and index + 1 < len(argv):
            roots.append(Path(argv[index + 1]))
        elif arg.startswith("--config-dir="):
            roots.append(Path(arg.split("=", 1)[1]))
        elif "searchpath" in arg:
            roots.extend(Path(match) for match in re.findall(r"file://([^,\]\s'\"]+)", arg))
    return roots


# --------------------------------------------------------------------------- the typed config


def abuse_problems(
    cfg: GauntletConfig, where_of: Callable[[str, str, Sequence[str]], str]
) -> list[ConfigProblem]:
    """Flags smuggled through extra_args/sim_args, values that would read as another flag, unsafe names.

    ``where_of(package, group, key_path)`` names the file that set a field (see validate's Sources).
    """
    out: list[ConfigProblem] = []
    sections: list[tuple[str, str, str, Mapping[str, Any]]] = [
        ("service", "service", "extra_args", cfg.service.extra_args),
        ("host", "host", "sim_args", cfg.host.sim_args),
    ]
    for package, cand in (("candidate", cfg.candidate), ("candidate@baseline", cfg.baseline)):
        sections.append((package, "candidate", "extra_args", cand.extra_args))
        sections.append((package, "candidate", "sim_args", cand.sim_args))
    for package, group, field_name, args in sections:
        prefix = package.rpartition("@")[2]
        for name, value in args.items():
            problem = flag_problem(str(name), value)
            if problem is not None:
                path = [field_name, str(name)]
                out.append(
                    ConfigProblem(
                        where_of(package, group, path), f"{prefix}.{'.'.join(path)}", value, problem
                    )
                )
    for name in cfg.workloads:
        if not PATH_NAME.match(str(name)):
            out.append(
                ConfigProblem(
                    where_of(f"workload@workloads.{name}", "workload", ["name"]),
                    f"workloads.{name}",
                    name,
                    "1-64 letters, digits, '_', '.', '-' (a profile name names a directory)",
                )
            )
    return out


def flag_problem(name: str, value: Any) -> str | None:
    """Why ``name: value`` may not be an extra vLLM flag (what is allowed), or None when it may."""
    key = name.removeprefix("--")
    if not FLAG_NAME.match(key):
        return (
            "a flag name of lower-case letters, digits, '-' and '_' (no spaces, '=', quotes or shell syntax)"
        )
    dashed = key.replace("_", "-")
    for flag in SERVICE_FLAGS:
        if flag == dashed or flag.startswith(dashed):
            return (
                f"not --{flag} or a spelling of it (underscores, a prefix argparse expands): "
                f"where the retained service listens, what it serves and its key come from service.*"
            )
    for item in _strings(value):
        if item.startswith("-") and not NUMBER.match(item):
            return f"a value that does not start with '-' ({item!r} would be read as another flag)"
        if any(c in item for c in "\r\n\0"):
            return "a one-line value (no line breaks or NUL)"
    return None


def _strings(value: Any) -> list[str]:
    """The string scalars that become argv items as they are (mappings and lists are rendered as JSON)."""
    return [value] if isinstance(value, str) else []
