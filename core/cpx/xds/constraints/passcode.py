"""Pass checks written out as straight-line Python, one function per message type.

A pass check answers whether a message surely breaks no rule (see
:func:`cpx.xds.constraints.validate._passes`). Interpreting a type's plan costs a loop over each of
its tables (most of them empty) and a tuple unpacked per entry; the function written here for the
type reads each field it needs once, by name, and calls only the checks that exist: about three
times faster on the small messages resources are made of. It answers exactly what the plan says
(same field checks, same unset fields, oneofs and semantic rules), so findings stay the walk's.
"""

from __future__ import annotations

import keyword
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from google.protobuf.descriptor import Descriptor, FieldDescriptor

# (value, scope, nesting depth) -> whether it surely breaks no rule
Pass = Callable[[Any, Any, int], bool]

# A type with this many checked fields or fewer has each looked at by name; listing the set fields
# of a message (ListFields) costs about as much as looking at this many.
PROBES_MAX = 4


def _get(name: str) -> str:
    """The expression reading field ``name`` of ``m`` (getattr where the name is a keyword)."""
    return f"m.{name}" if name.isidentifier() and not keyword.iskeyword(name) else f"getattr(m, {name!r})"


class Checked(Protocol):
    """A plan as far as its check goes (validate.Plan)."""

    @property
    def check(self) -> Pass: ...

    @property
    def written(self) -> bool: ...  # its check final (written out)


# What the common checks are made of, for a type's written check to take them in rather than call
# them (they are closures, the fastest to call where they are called).
_SHAPES: weakref.WeakKeyDictionary[Pass, tuple[str, Any]] = weakref.WeakKeyDictionary()


def tests(fails: tuple[Callable[[Any], bool], ...]) -> Pass:
    """A value's own tests, and nothing below it."""
    if len(fails) == 1:
        fail = fails[0]

        def check(value: Any, scope: Any, depth: int) -> bool:
            return not fail(value)

    else:

        def check(value: Any, scope: Any, depth: int) -> bool:
            for fails_on in fails:  # noqa: SIM110  (why: twice as fast as all() over a generator)
                if fails_on(value):
                    return False
            return True

    _SHAPES[check] = ("tests", fails)
    return check


def enter(plan: Checked) -> Pass:
    """A message with rules below it: its type's check."""

    def check(value: Any, scope: Any, depth: int) -> bool:
        return plan.check(value, scope, depth)

    _SHAPES[check] = ("enter", plan)
    return check


def each(item: Pass) -> Pass:
    """Every item of a repeated field (with no rule on the field itself)."""

    def check(values: Any, scope: Any, depth: int) -> bool:
        for value in values:  # noqa: SIM110  (why: twice as fast as all() over a generator)
            if not item(value, scope, depth):
                return False
        return True

    _SHAPES[check] = ("each", item)
    return check


class Planned(Protocol):
    """What a pass check is written from: the parts of validate.Plan it reads."""

    @property
    def passes(self) -> Mapping[FieldDescriptor, Pass]: ...  # the checks of set fields

    @property
    def absent(self) -> Sequence[tuple[str, Any, str, str]]: ...  # (field name, ...): unset breaks a rule

    @property
    def required_oneofs(self) -> Sequence[tuple[str, str]]: ...  # (oneof name, ...)

    @property
    def rules(self) -> Sequence[Callable[[Any, Any], Iterable[object]]]: ...

    @property
    def scope(self) -> Callable[[Any, Any], Any] | None: ...

    @property
    def memo(self) -> object | None: ...  # read at each call: it may be given up on


def compile_pass(
    descriptor: Descriptor,
    plan: Planned,
    memo: tuple[Callable[..., Any], Callable[..., Any]] | None,
    max_depth: int,
    own_only: bool = False,
    rules: Sequence[Callable[[Any, Any], Iterable[object]]] | None = None,
) -> Pass:
    """The pass check of one type, as its filled ``plan`` says; ``memo`` is the walk's (missed,
    remember) when the plan has a memo.  ``own_only``: only the rules of the message itself (its
    unset fields, oneofs and semantic rules, in the scope given), for a caller that checked its
    fields already.  ``rules``: the semantic rules to run instead of the plan's (those that can find
    anything in the messages checked)."""
    if own_only:
        memo = None
    names: dict[str, Any] = {"P": plan, "LIMIT": max_depth}
    body = ["if depth > LIMIT:", "    return False"]
    if memo is not None:
        names["missed"], names["remember"] = memo
        # The walk's recall (validate._recall) written out: a hit, the common case, costs no call.
        body += [
            "memo = P.memo",
            "if memo is not None:",
            "    key = (P, m.SerializeToString(), scope)",
            "    found = memo.get(key)",
            "    if found is not None:",
            "        P.hits += 1",
            "        return not found",
            "    missed(P)",
        ]
    if plan.scope is not None and not own_only:
        names["S"] = plan.scope
        body.append("scope = S(m, scope)")
    checks = {} if own_only else plan.passes
    if checks:
        body.append("depth += 1")
        body += _probes(checks, names) if len(checks) <= PROBES_MAX else _listed(checks, names)
    for i, (name, *_) in enumerate(plan.absent):
        body += [f"if {_unset(descriptor.fields_by_name[name], f'a{i}', names)}:", "    return False"]
    for oneof, _ in plan.required_oneofs:
        body += [f"if m.WhichOneof({oneof!r}) is None:", "    return False"]
    for i, rule in enumerate(plan.rules if rules is None else rules):
        names[f"r{i}"] = rule
        body += [f"for _ in r{i}(m, scope):", "    return False"]
    if memo is not None:
        body += ["if memo is not None:", "    remember(P, key, [], None)"]
    body.append("return True")
    source = "def passes(m, scope, depth):\n" + "".join(f"    {line}\n" for line in body)
    # The source holds field names and local names only; every value is passed in ``names``.
    kind = "own rules" if own_only else "pass check"
    exec(compile(source, f"<{kind} of {descriptor.full_name}>", "exec"), names)
    check: Pass = names["passes"]
    return check


def entered_plan(check: Pass) -> object | None:
    """The plan whose check ``check`` calls, when it is :func:`enter`'s."""
    shape, part = _SHAPES.get(check, ("", None))
    return part if shape == "enter" else None


def compiled(plan: Checked) -> None:
    """``plan``'s check is written (it never changes after): bind the entries waiting for it."""
    for table, field in _WAITING.pop(plan, ()):
        table[field] = plan.check


def _probes(checks: Mapping[FieldDescriptor, Pass], names: dict[str, Any]) -> list[str]:
    """Each checked field by name, when set as ListFields would list it: a field with presence
    when it has it, others when not empty (a proto3 -0.0 aside, which every rule reads as 0.0, so
    the field's unset entry, if a rule fails on 0.0, answers for it)."""
    lines: list[str] = []
    for i, (field, check) in enumerate(checks.items()):
        get = _get(field.name)
        if field.has_presence:
            lines += [f"if m.HasField({field.name!r}):", f"    v = {get}"]
        elif field.is_repeated:
            lines += [f"v = {get}", "if v:"]
        else:
            names[f"d{i}"] = field.default_value
            lines += [f"v = {get}", f"if v != d{i}:"]
        lines += [f"    {line}" for line in _inline(check, f"{i}", names)]
    return lines


def _inline(check: Pass, tag: str, names: dict[str, Any], var: str = "v") -> list[str]:
    """Lines that return False unless ``var`` passes ``check``, its call written out if known."""
    shape, part = _SHAPES.get(check, ("", None))
    if shape == "tests":
        lines = []
        for j, fails in enumerate(part):
            names[f"t{tag}_{j}"] = fails
            lines += [f"if t{tag}_{j}({var}):", "    return False"]
        return lines
    if shape == "enter":
        names[f"q{tag}"] = part
        return [f"if not q{tag}.check({var}, scope, depth):", "    return False"]
    if shape == "each" and _SHAPES.get(part, ("",))[0] in ("tests", "enter"):
        return [f"for x in {var}:", *(f"    {line}" for line in _inline(part, f"{tag}i", names, "x"))]
    names[f"c{tag}"] = check
    return [f"if not c{tag}({var}, scope, depth):", "    return False"]


# Per plan not compiled yet, the tables of _listed whose entries are to call its check directly
# once it is (see compiled).
_WAITING: weakref.WeakKeyDictionary[Any, list[tuple[dict[FieldDescriptor, Pass], FieldDescriptor]]] = (
    weakref.WeakKeyDictionary()
)


def _listed(checks: Mapping[FieldDescriptor, Pass], names: dict[str, Any]) -> list[str]:
    table = names["F"] = dict(checks)
    # A message field's entry calls its type's check itself rather than enter's closure (one call
    # less per message); a type compiled later is bound when it is (compiled).
    for field, check in checks.items():
        shape, part = _SHAPES.get(check, ("", None))
        if shape == "enter":
            if part.written:
                table[field] = part.check
            else:
                _WAITING.setdefault(part, []).append((table, field))
    return [
        "for f, v in m.ListFields():",
        "    c = F.get(f)",
        "    if c is not None and not c(v, scope, depth):",
        "        return False",
    ]


def _unset(field: FieldDescriptor, default: str, names: dict[str, Any]) -> str:
    """The condition that ``field`` is unset, as validate._unset_test reads it."""
    get = _get(field.name)
    if field.is_repeated:
        return f"not {get}"
    if field.message_type is not None:
        return f"not m.HasField({field.name!r})"
    names[default] = field.default_value
    return f"{get} == {default}"
