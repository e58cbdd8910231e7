"""The flags a server program accepts, read from its ``--help``; a rendered command line checked against them.

Pipeline position: ``doctor`` (:mod:`launch.preflight`), between a launch spec and the installed server.
vLLM's ``--help`` (0.32: ``python -m vllm.entrypoints.openai.api_server --help`` and ``vllm serve --help``)
prints an argparse usage block that lists every option with its metavar or its ``{choices}``, whatever
group the body shows; the simulator's parser prints the same shape. Pure::

    table = parse_help(help_text)
    check_args(["--max-num-seqs", "16", "--kv-cache-dtype", "fp9"], table)
    # [FlagProblem(flag='--kv-cache-dtype', message="value 'fp9' is not one of auto, fp8, ...")]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FlagInfo:
    """One option string as the parser takes it."""

    takes_value: bool
    #: The values it accepts (``{a,b}`` in the usage), or None for any value.
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class FlagTable:
    """Every option string of a program (``--x``, ``--no-x``, ``-tp``) and what it takes."""

    flags: dict[str, FlagInfo] = field(default_factory=dict)

    def __contains__(self, flag: object) -> bool:
        return flag in self.flags


@dataclass(frozen=True)
class FlagProblem:
    """A flag of a rendered command line that the program would refuse."""

    flag: str
    message: str

    def __str__(self) -> str:
        return f"{self.flag}: {self.message}"


def _groups(usage: str) -> list[str]:
    """The top-level ``[...]`` groups of an argparse usage text."""
    out: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(usage):
        if ch == "[":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == "]" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(usage[start:i])
    return out


def _usage_block(text: str) -> str | None:
    match = re.search(r"^usage:.*?(?=\n\s*\n|\Z)", text, flags=re.MULTILINE | re.DOTALL)
    return match.group(0) if match else None


def _add(table: dict[str, FlagInfo], alternative: str) -> None:
    parts = alternative.strip().split(None, 1)
    if not parts or not parts[0].startswith("-"):
        return  # a positional
    flag, rest = parts[0], parts[1].strip() if len(parts) > 1 else ""
    if not rest:
        table[flag] = FlagInfo(takes_value=False)
    elif rest.startswith("{"):
        choices = tuple(c.strip() for c in rest[1 : rest.index("}")].split(","))
        table[flag] = FlagInfo(takes_value=True, choices=choices)
    else:
        table[flag] = FlagInfo(takes_value=True)


def parse_help(text: str) -> FlagTable:
    """The option strings of an argparse ``--help`` text (its usage block; without one, the option lines).

    ``[--x | --no-x | -ep]`` gives three switches, ``[--x X]`` a value, ``[--x {a,b}]`` a choice.
    """
    table: dict[str, FlagInfo] = {}
    usage = _usage_block(text)
    if usage is not None:
        for group in _groups(usage):
            for alternative in group.split(" | "):
                _add(table, alternative)
        return FlagTable(table)
    for line in text.splitlines():  # no usage block: the body's "  --x X, -x X   help" lines
        stripped = line.strip()
        if stripped.startswith("-"):
            head = re.split(r"\s{2,}", stripped, maxsplit=1)[0]
            for alternative in head.split(", "):
                _add(table, alternative)
    return FlagTable(table)


def _normal(flag: str) -> str:
    """vLLM's spelling rule: underscores in a flag's name read as dashes (up to a ``.`` sub-key)."""
    if not flag.startswith("--"):
        return flag
    name, dot, sub = flag[2:].partition(".")
    return "--" + name.replace("_", "-") + dot + sub


def check_args(args: Sequence[str], table: FlagTable) -> list[FlagProblem]:
    """Each flag of ``args`` (a command line after its program) that ``table`` does not accept as given.

    Positional words before the first flag (``vllm serve MODEL``) are the program's; after a flag that
    takes no value a word is refused, as argparse refuses it.
    """
    problems: list[FlagProblem] = []
    i, seen_flag = 0, False
    while i < len(args):
        word = args[i]
        if not word.startswith("-") or word == "-":
            if seen_flag:
                problems.append(FlagProblem(word, "unexpected word (the flag before it takes no value)"))
            i += 1
            continue
        seen_flag = True
        flag, eq, inline = word.partition("=")
        name = _normal(flag)
        base = name.split(".", 1)[0] if name.startswith("--") else name
        info = table.flags.get(name) or table.flags.get(base)
        value: str | None = inline if eq else None
        takes = info is None or info.takes_value
        if value is None and takes and i + 1 < len(args) and not args[i + 1].startswith("--"):
            value = args[i + 1]
            i += 1
        i += 1
        if info is None:
            problems.append(FlagProblem(flag, "not a flag of the installed server (unrecognized argument)"))
            continue
        if info.takes_value and value is None:
            problems.append(FlagProblem(flag, "needs a value"))
        elif not info.takes_value and eq:
            problems.append(FlagProblem(flag, f"takes no value, got {value!r}"))
        elif info.choices is not None and value is not None and not _chosen(value, info.choices):
            problems.append(FlagProblem(flag, f"value {value!r} is not one of {', '.join(info.choices)}"))
    return problems


def _chosen(value: str, choices: tuple[str, ...]) -> bool:
    # vLLM lower-cases some choice values and reads dashes as underscores (--moe-backend).
    return value in choices or value.lower().replace("-", "_") in choices


def program_part(entrypoint: Sequence[str]) -> list[str]:
    """The words of a host's entry point that name the program: up to its first flag or ``{model}``.

    ``[vllm, serve, "{model}"]`` -> ``[vllm, serve]``; ``[python, -m, launch.sim, --model, "{model}"]`` ->
    ``[python, -m, launch.sim]`` (``-m MODULE`` belongs to the interpreter).
    """
    out: list[str] = []
    words = list(entrypoint)
    i = 0
    while i < len(words):
        word = words[i]
        if "{model}" in word or word.startswith("--"):
            break
        if word == "-m" and i + 1 < len(words):
            out.extend(words[i : i + 2])
            i += 2
            continue
        if word.startswith("-") and out:
            break
        out.append(word)
        i += 1
    return out
