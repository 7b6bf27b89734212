"""Check generated Envoy resources against the constraints Envoy declares for them.

``violations(message)`` answers what Envoy would refuse in a Listener, RouteConfiguration, Route,
Cluster, ClusterLoadAssignment or Secret (or any part of one) before it is published:

- the protoc-gen-validate rules carried in the descriptors (``validate.rules`` on fields,
  ``validate.required`` on oneofs, ``validate.disabled``/``ignored`` on messages), evaluated as
  Envoy's generated C++ validators do (see :mod:`cpx.xds.constraints.pgv`);
- ``google.protobuf.Any`` payloads (``typed_config``, ``typed_per_filter_config``) unpacked when
  their type is known, since Envoy validates each extension's config when it builds it;
- fields and enum values Envoy refuses as deprecated and ``disallowed_by_default``;
- Envoy's own rules beyond PGV (:mod:`cpx.xds.constraints.semantic`).

Speed: each message type is compiled, when a walk first reaches it, into a :class:`Plan` (a handler
per field with rules, the violations an unset field implies, the semantic rules); types with no
rule anywhere below them are never entered. A message is first put to its type's pass check, which
only answers whether the walk would find nothing (see :func:`_passes`); only a message it does not
pass is walked. See docs/design/0004-envoy-constraints.md and 0020-startup.md.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
from envoy.annotations import deprecation_pb2
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from validate import validate_pb2

from cpx.xds.constraints import pgv, semantic
from cpx.xds.constraints.passcode import compile_pass, compiled, each, enter, entered_plan, tests
from cpx.xds.constraints.semantic import Scope, ScopeRule, SemanticRule
from cpx.xds.types import message_class


@attrs.frozen
class Violation:
    """One thing Envoy would refuse: where, which rule, and why in words."""

    path: str  # e.g. virtual_hosts[0].routes[2].request_headers_to_add[0].header.value
    rule: str  # e.g. string.well_known_regex: HTTP_HEADER_VALUE (strict)
    message: str  # e.g. value does not match regex pattern "^[^\0\n\r]*$"

    def __str__(self) -> str:
        return f"{self.path or '(message)'}: {self.message} [{self.rule}]"


# A value's place: (parent, field name, index or map key or None); None is the checked message.
Path = tuple[Any, str, object] | None
# Checks one value (a field's, an item's) whose place is ``path``.
Check = Callable[[Any, Path, list[Violation], Scope], None]
# Checks a set field of a message: its value and the message's place.
Handler = Callable[[Any, Path, list[Violation], Scope], None]
# Whether a value (a set field's, an item's) surely breaks no rule: (value, scope, nesting depth).
Pass = Callable[[Any, Scope, int], bool]

_ANY = "google.protobuf.Any"
_WRAPPERS = frozenset(
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)


def path_text(path: Path) -> str:
    parts: list[str] = []
    while path is not None:
        parent, name, key = path
        if key is None:
            parts.append(name)
        elif isinstance(key, int):
            parts.append(f"{name}[{key}]")
        else:
            parts.append(f'{name}["{key}"]')
        path = parent
    return ".".join(reversed(parts))


def _join(path: Path, relative: str) -> str:
    base = path_text(path)
    if not relative:
        return base
    return f"{base}.{relative}" if base else relative


@attrs.define(eq=False)
class Plan:
    """What checking one message type takes; filled on its first walk, read by every walk after.

    Types are compiled as walks reach them: a Listener reaches hundreds of types, resources hold
    a few dozen of them.
    """

    descriptor: Descriptor | None = None
    prepare: Callable[[Plan], None] | None = None  # fills the plan (Checker._prepare)
    ready: bool = False  # filled
    written: bool = False  # its check is final: written out (passcode), or trivial
    active: bool = False  # any rule in this message or below it
    handlers: dict[FieldDescriptor, Handler] = attrs.field(factory=dict)  # for set fields
    passes: dict[FieldDescriptor, Pass] = attrs.field(factory=dict)  # the same, only answering (_passes)
    # The type's pass check (see _passes), written out once the plan is filled.
    check: Pass = attrs.field(factory=lambda: _not_sure)
    # (field name, whether it is unset, rule, message): what an unset field breaks
    absent: tuple[tuple[str, Callable[[Any, str], bool], str, str], ...] = ()
    required_oneofs: tuple[tuple[str, str], ...] = ()  # (oneof, its fields for the message)
    rules: tuple[SemanticRule, ...] = ()
    scope: ScopeRule | None = None
    # The checker's memo of findings by bytes (see _walk), for types with messages to walk below them
    # (a leaf is walked about as fast as it is looked up); dropped once this type's parts prove not to
    # repeat (hits and misses count the lookups).
    memo: Memo | None = None
    hits: int = 0
    misses: int = 0


# The findings of a walk, relative to the walked message, by (plan, its bytes, scope).
MemoKey = tuple[Plan, bytes, Scope]
Memo = dict[MemoKey, tuple[Violation, ...]]
_MEMO_MAX = 4096
# A type's findings stop being kept once it has missed this often, hitting less than one time in four.
_MEMO_TRIAL = 64


def _walk(message: Any, plan: Plan, path: Path, out: list[Violation], scope: Scope) -> None:
    # Generated resources repeat their parts (every EDS cluster's eds_config, the paths of Ingress
    # rules, endpoints behind many Services): the findings for the same bytes (so the same message)
    # in the same scope are the same, and serialising in C costs a fraction of a walk.  Looked up
    # here rather than in a wrapper, so a nested message costs no extra frame of recursion (deep
    # nesting is reported as protobuf.depth at the same depth).
    if not plan.ready and plan.prepare is not None:
        plan.prepare(plan)
    key = (plan, message.SerializeToString(), scope) if plan.memo is not None else None
    if key is not None:
        found = _recall(plan, key)
        if found is not None:
            if found:
                _extend_at(out, path, found)
            return
    start = len(out)
    if plan.scope is not None:
        scope = plan.scope(message, scope)
    if plan.handlers:
        handlers = plan.handlers
        for field, value in message.ListFields():
            handler = handlers.get(field)
            if handler is not None:
                handler(value, path, out, scope)
    _unset_and_semantic(message, plan, path, out, scope)
    if key is not None:
        _remember(plan, key, out[start:], path)


def _unset_and_semantic(message: Any, plan: Plan, path: Path, out: list[Violation], scope: Scope) -> None:
    for name, unset, rule, text in plan.absent:
        if unset(message, name):
            out.append(Violation(_join(path, name), rule, text))
    for oneof, fields_text in plan.required_oneofs:
        if message.WhichOneof(oneof) is None:
            text = f"value is required: set one of {fields_text}"
            out.append(Violation(_join(path, oneof), "oneof.required", text))
    for semantic_rule in plan.rules:
        for relative, rule, text in semantic_rule(message, scope):
            out.append(Violation(_join(path, relative), rule, text))


# Nesting beyond this is left to the walk, so a message passes only where the walk (more frames per
# level) would not run out of stack either: its RecursionError is reported as protobuf.depth.
_PASS_DEPTH = 60


def _passes(message: Any, plan: Plan, scope: Scope, depth: int) -> bool:
    """Whether a walk of ``message`` would find nothing: the same rules, without paths or findings.

    Nearly every message passes, and answering that costs far less than the walk's bookkeeping;
    False means "maybe not", after which the walk words what it finds (so findings are the walk's
    by construction).  Each type's check is written out as Python (:mod:`.passcode`); it shares
    the walk's memo, clean parts stored as no findings.
    """
    return plan.check(message, scope, depth)


# Writing out a type's pass check (compiling it) costs ~0.2 ms, a few hundred interpreted runs' worth.
_WRITE_AFTER = 16


def _interpret(message: Any, plan: Plan, scope: Scope, depth: int) -> bool:
    """What the check :func:`.passcode.compile_pass` writes for ``plan`` answers, read from the plan."""
    if depth > _PASS_DEPTH:
        return False
    memo = plan.memo
    key = None
    if memo is not None:
        key = (plan, message.SerializeToString(), scope)
        found = memo.get(key)
        if found is not None:
            plan.hits += 1
            return not found
        _missed(plan)
    if not _interpret_parts(message, plan, scope, depth):
        return False
    if memo is not None and key is not None:
        _remember(plan, key, [], None)
    return True


def _interpret_parts(message: Any, plan: Plan, scope: Scope, depth: int) -> bool:
    """:func:`_interpret` past the memo: the message's set fields, then its own rules."""
    if plan.scope is not None:
        scope = plan.scope(message, scope)
    passes = plan.passes
    if passes:
        for field, value in message.ListFields():
            check = passes.get(field)
            if check is not None and not check(value, scope, depth + 1):
                return False
    for name, unset, _, _ in plan.absent:
        if unset(message, name):
            return False
    for oneof, _ in plan.required_oneofs:
        if message.WhichOneof(oneof) is None:
            return False
    for rule in plan.rules:
        for _ in rule(message, scope):
            return False
    return True


def _not_sure(message: Any, scope: Scope, depth: int) -> bool:
    return False


def _always(message: Any, scope: Scope, depth: int) -> bool:
    return True


def _preparing(plan: Plan) -> Pass:
    """A plan's check until it is filled: fills it, then hands over to the check written for it."""

    def check(message: Any, scope: Scope, depth: int) -> bool:
        if plan.prepare is not None:
            plan.prepare(plan)
        return plan.ready and plan.check(message, scope, depth)

    return check


def _recall(plan: Plan, key: MemoKey) -> tuple[Violation, ...] | None:
    found = plan.memo.get(key) if plan.memo is not None else None
    if found is not None:
        plan.hits += 1
        return found
    _missed(plan)
    return None


def _missed(plan: Plan) -> None:
    """Count a lookup that found nothing (the pass checks count their hits themselves)."""
    plan.misses += 1
    if plan.misses >= _MEMO_TRIAL and plan.hits * 4 < plan.misses:
        plan.memo = None  # this type's parts hardly repeat: walk them without looking them up


def _remember(plan: Plan, key: MemoKey, found: list[Violation], path: Path) -> None:
    memo = plan.memo
    if memo is None:
        return  # given up on since it was looked up
    if len(memo) >= _MEMO_MAX:
        memo.clear()  # a crude bound; the next parts refill it
    memo[key] = _relative(found, path) if found else ()


def _relative(found: list[Violation], path: Path) -> tuple[Violation, ...]:
    """Findings at ``path`` made relative to it (each path starts with the path of ``path``)."""
    base = path_text(path)
    if not base:
        return tuple(found)
    cut = len(base) + 1
    return tuple(attrs.evolve(v, path=v.path[cut:]) for v in found)


def _extend_at(out: list[Violation], path: Path, found: Iterable[Violation]) -> None:
    """Add findings relative to the value at ``path``."""
    base = path_text(path)
    if not base:
        out.extend(found)
        return
    out.extend(attrs.evolve(v, path=f"{base}.{v.path}" if v.path else base) for v in found)


@attrs.frozen
class _Walk:
    """The check that walks into a nested message (a class, so a field handler can skip a layer)."""

    plan: Plan

    def __call__(self, value: Any, path: Path, out: list[Violation], scope: Scope) -> None:
        _walk(value, self.plan, path, out, scope)

    def handler(self, name: str) -> Handler:
        plan = self.plan

        def handle(value: Any, parent: Path, out: list[Violation], scope: Scope) -> None:
            _walk(value, plan, (parent, name, None), out, scope)

        return handle


@attrs.frozen
class _Tests:
    """Value tests as a check (a class, so a field handler can run them without building a path)."""

    tests: tuple[pgv.Test, ...]
    unwrap: bool = False  # test a wrapper's ``value``

    def __call__(self, value: Any, path: Path, out: list[Violation], scope: Scope) -> None:
        if self.unwrap:
            value = value.value
        for test in self.tests:
            if test.fails(value):
                out.append(Violation(path_text(path), test.rule, test.message))

    def handler(self, name: str) -> Handler:
        tests, unwrap = self.tests, self.unwrap

        def handle(value: Any, parent: Path, out: list[Violation], scope: Scope) -> None:
            if unwrap:
                value = value.value
            for test in tests:
                if test.fails(value):
                    out.append(Violation(path_text((parent, name, None)), test.rule, test.message))

        return handle


def _tests_check(tests: Sequence[pgv.Test], unwrap: bool = False) -> Check | None:
    return _Tests(tuple(tests), unwrap) if tests else None


def _chain(*checks: Check | None) -> Check | None:
    present = tuple(c for c in checks if c is not None)
    if len(present) <= 1:
        return present[0] if present else None

    def check(value: Any, path: Path, out: list[Violation], scope: Scope) -> None:
        for one in present:
            one(value, path, out, scope)

    return check


def _rules_of(field: FieldDescriptor) -> validate_pb2.FieldRules | None:
    options = field.GetOptions()
    if not options.HasExtension(validate_pb2.rules):
        return None
    rules: validate_pb2.FieldRules = options.Extensions[validate_pb2.rules]
    return rules


def _disallowed_enum_values(field: FieldDescriptor) -> frozenset[int]:
    if field.enum_type is None:
        return frozenset()
    return frozenset(
        value.number
        for value in field.enum_type.values
        if value.GetOptions().deprecated
        and value.GetOptions().Extensions[deprecation_pb2.disallowed_by_default_enum]
    )


def _disallowed_field(field: FieldDescriptor) -> bool:
    options = field.GetOptions()
    return bool(options.deprecated and options.Extensions[deprecation_pb2.disallowed_by_default])


@attrs.frozen
class _Value:
    """What one value of a field is checked for: its own tests, then the message it holds."""

    tests: tuple[pgv.Test, ...] = ()
    unwrap: bool = False  # the tests are on a wrapper's ``value``
    is_any: bool = False  # a google.protobuf.Any: its payload is checked when its type is known
    plan: Plan | None = None  # a message with rules below it, walked into


def _never(value: Any, scope: Scope, depth: int) -> bool:
    return False  # a field that breaks a rule by being set


_TOP = Scope()
_ANY_RESULTS_MAX = 4096


@attrs.define(eq=False)
class Checker:
    """Checks messages against PGV and the given semantic rules; plans are cached per type.

    Build one per rule set (``default_checker()`` has Envoy's) and keep it: the cache is the speed.
    """

    rules: Mapping[str, tuple[SemanticRule, ...]] = attrs.field(factory=lambda: semantic.ENVOY_RULES)
    scopes: Mapping[str, ScopeRule] = attrs.field(factory=lambda: semantic.ENVOY_SCOPES)
    remember: bool = True  # keep findings of repeated parts (see _walk); off: every part is walked
    _plans: dict[str, Plan] = attrs.field(factory=dict, init=False)  # filled or not yet
    _active: dict[str, bool] = attrs.field(factory=dict, init=False)
    _anys: dict[str, tuple[type[Message], Plan] | None] = attrs.field(factory=dict, init=False)
    _any_results: dict[tuple[str, bytes, Scope], tuple[Violation, ...]] = attrs.field(
        factory=dict, init=False
    )
    _memo: Memo = attrs.field(factory=dict, init=False)
    _lock: threading.RLock = attrs.field(factory=threading.RLock, init=False)

    def with_rules(self, extra: Mapping[str, Iterable[SemanticRule]]) -> Checker:
        """A checker with more semantic rules (e.g. a plugin's, for its own extension configs)."""
        merged = {name: tuple(rules) for name, rules in self.rules.items()}
        for name, rules in extra.items():
            merged[name] = merged.get(name, ()) + tuple(rules)
        return Checker(rules=merged, scopes=self.scopes, remember=self.remember)

    def violations(self, message: Message) -> list[Violation]:
        """Everything Envoy would refuse in ``message``, in field order; empty when it is fine."""
        out: list[Violation] = []
        scope = _TOP
        name = message.DESCRIPTOR.full_name
        plan = self._plans.get(name)
        try:
            # The common case first: a filled plan of a type met before, and a message that passes.
            if plan is not None and plan.ready and name != _ANY:
                if plan.check(message, scope, 0):
                    return out
            elif self._passes(message):
                return out
        except RecursionError:
            pass  # the walk reports it (or finds the message fine, nested deeper than _passes goes)
        try:
            if message.DESCRIPTOR.full_name == _ANY:
                self._check_any(message, None, out, scope)
            else:
                plan = self.plan(message.DESCRIPTOR)
                if plan.active:
                    _walk(message, plan, None, out, scope)
        except RecursionError:
            # Only a message built in memory can nest this deep; Envoy's parser stops at 100 levels.
            out.append(Violation("", "protobuf.depth", "message nested too deeply for Envoy to parse"))
        return out

    def _passes(self, message: Message) -> bool:
        if message.DESCRIPTOR.full_name == _ANY:
            return self._any_passes(message, _TOP, 0)
        plan = self.plan(message.DESCRIPTOR)
        return not plan.active or _passes(message, plan, _TOP, 0)

    # -- compiling ----------------------------------------------------------------------------------

    def plan(self, descriptor: Descriptor) -> Plan:
        """The type's plan, filled."""
        plan = self._plan_of(descriptor)
        if not plan.ready:
            self._prepare(plan)
        return plan

    def _plan_of(self, descriptor: Descriptor) -> Plan:
        """The type's plan, filled on its first walk (so recursive types need no care)."""
        plan = self._plans.get(descriptor.full_name)
        if plan is not None:
            return plan
        with self._lock:
            plan = self._plans.get(descriptor.full_name)
            if plan is None:
                plan = self._plans[descriptor.full_name] = Plan(descriptor=descriptor, prepare=self._prepare)
                plan.check = _preparing(plan)
            return plan

    def _prepare(self, plan: Plan) -> None:
        with self._lock:
            if not plan.ready and plan.descriptor is not None:
                self._compile(plan.descriptor, plan)
                if plan.written:
                    compiled(plan)
                plan.ready = True  # last: walks in other threads read the plan without the lock

    def is_active(self, descriptor: Descriptor) -> bool:
        """Whether any rule applies in this type or in a type reachable from it."""
        with self._lock:
            known = self._active.get(descriptor.full_name)
            if known is not None:
                return known
            seen: dict[str, Descriptor] = {}
            queue = [descriptor]
            while queue:
                current = queue.pop()
                if current.full_name in seen:
                    continue
                seen[current.full_name] = current
                if self._active.get(current.full_name) or self._has_own_rules(current):
                    self._active[descriptor.full_name] = True
                    return True
                queue.extend(f.message_type for f in current.fields if f.message_type is not None)
            # Nothing reachable has rules, so nothing reachable from any of them has either.
            for name in seen:
                self._active[name] = False
            return False

    def _has_own_rules(self, descriptor: Descriptor) -> bool:
        if descriptor.full_name in self.rules or descriptor.full_name in self.scopes:
            return True
        if descriptor.full_name == _ANY:
            return True  # its payload may have rules
        if not self._pgv_enabled(descriptor):
            return False
        if any(o.GetOptions().Extensions[validate_pb2.required] for o in descriptor.oneofs):
            return True
        return any(
            _rules_of(f) is not None or _disallowed_field(f) or _disallowed_enum_values(f)
            for f in descriptor.fields
        )

    @staticmethod
    def _pgv_enabled(descriptor: Descriptor) -> bool:
        options = descriptor.GetOptions()
        return not (options.Extensions[validate_pb2.disabled] or options.Extensions[validate_pb2.ignored])

    def _compile(self, descriptor: Descriptor, plan: Plan) -> None:
        plan.active = self.is_active(descriptor)
        if not plan.active:
            plan.check, plan.written = _always, True
            return
        pgv_on = self._pgv_enabled(descriptor)
        absent: list[tuple[str, Callable[[Any, str], bool], str, str]] = []
        for field in descriptor.fields:
            rules = _rules_of(field) if pgv_on else None
            checks = self._field_checks(field, rules, pgv_on)
            if checks is not None:
                plan.handlers[field], plan.passes[field] = checks
            if pgv_on:
                unset = _unset_test(field)
                absent.extend(
                    (field.name, unset, rule, text) for rule, text in self._when_unset(field, rules)
                )
        plan.absent = tuple(absent)
        if pgv_on:
            plan.required_oneofs = tuple(
                (o.name, ", ".join(f.name for f in o.fields))
                for o in descriptor.oneofs
                if o.GetOptions().Extensions[validate_pb2.required]
            )
        plan.rules = tuple(self.rules.get(descriptor.full_name, ()))
        plan.scope = self.scopes.get(descriptor.full_name)
        if self.remember and any(
            f.message_type is not None and self.is_active(f.message_type) for f in descriptor.fields
        ):
            plan.memo = self._memo
        memo = (_missed, _remember) if plan.memo is not None else None
        plan.check = self._interpreted(descriptor, plan, memo)

    def _interpreted(
        self, descriptor: Descriptor, plan: Plan, memo: tuple[Callable[..., Any], Callable[..., Any]] | None
    ) -> Pass:
        """The plan's check, interpreted (:func:`_interpret`) until it has run ``_WRITE_AFTER``
        times, then written out: most types a build reaches (a listener's filters) are checked once
        or twice, a few (routes, clusters) thousands of times."""
        runs = 0

        def check(message: Any, scope: Scope, depth: int) -> bool:
            nonlocal runs
            runs += 1
            if runs < _WRITE_AFTER:
                return _interpret(message, plan, scope, depth)
            with self._lock:
                if not plan.written:
                    plan.check = compile_pass(descriptor, plan, memo, _PASS_DEPTH)
                    plan.written = True
                    compiled(plan)
            return plan.check(message, scope, depth)

        return check

    def _field_checks(
        self, field: FieldDescriptor, rules: validate_pb2.FieldRules | None, pgv_on: bool
    ) -> tuple[Handler, Pass] | None:
        """The handler of a set field, and the pass check that answers for it (see _passes)."""
        name = field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            return self._map_checks(field, rules)
        if field.is_repeated:
            return self._repeated_checks(field, rules)
        value = self._value(field, rules)
        check, passes = self._value_check(value), self._value_pass(value)
        if pgv_on and _disallowed_field(field):
            check, passes = _chain(_disallowed_check(field), check), _never
        if check is None or passes is None:
            return None
        if isinstance(check, _Walk | _Tests):
            return check.handler(name), passes
        one: Check = check

        def handle(value: Any, parent: Path, out: list[Violation], scope: Scope) -> None:
            one(value, (parent, name, None), out, scope)

        return handle, passes

    def _value(self, field: FieldDescriptor, rules: validate_pb2.FieldRules | None) -> _Value:
        """What one value of ``field`` is checked for (the field's own, or one item or map value)."""
        kind = rules.WhichOneof("type") if rules is not None else None
        message_type = field.message_type
        if message_type is None:
            tests = pgv.scalar_tests(kind, getattr(rules, kind), field.enum_type) if kind and rules else []
            banned = _disallowed_enum_values(field)
            if banned:
                tests.append(_disallowed_enum_test(field, banned))
            return _Value(tuple(tests))
        own: Sequence[pgv.Test] = ()
        unwrap = False
        if kind is not None and rules is not None:
            kind_rules = getattr(rules, kind)
            if message_type.full_name in _WRAPPERS and kind not in (
                "message",
                "duration",
                "timestamp",
                "any",
            ):
                own, unwrap = pgv.scalar_tests(kind, kind_rules), True
            elif kind == "duration":
                own = pgv.duration_tests(kind_rules)
            elif kind == "timestamp":
                own = pgv.timestamp_tests(kind_rules)
            elif kind == "any":
                own = pgv.any_tests(kind_rules)
        skip = rules is not None and rules.HasField("message") and rules.message.skip
        if message_type.full_name == _ANY:
            return _Value(tuple(own), unwrap and bool(own), is_any=True)
        if skip or not self.is_active(message_type):
            return _Value(tuple(own), unwrap and bool(own))
        return _Value(tuple(own), unwrap and bool(own), plan=self._plan_of(message_type))

    def _value_check(self, value: _Value) -> Check | None:
        own = _tests_check(value.tests, value.unwrap)
        if value.is_any:
            return _chain(own, self._check_any)
        return _chain(own, _Walk(value.plan) if value.plan is not None else None)

    def _value_pass(self, value: _Value) -> Pass | None:
        below: Pass | None = None
        if value.is_any:
            below = self._any_passes
        elif value.plan is not None:
            below = enter(value.plan)
        fails = tuple(test.fails for test in value.tests)
        if not fails:
            return below
        if below is None and not value.unwrap:
            return tests(fails)
        unwrap = value.unwrap

        def passes(item: Any, scope: Scope, depth: int) -> bool:
            tested = item.value if unwrap else item
            for fails_on in fails:
                if fails_on(tested):
                    return False
            return below is None or below(item, scope, depth)

        return passes

    def _repeated_checks(
        self, field: FieldDescriptor, rules: validate_pb2.FieldRules | None
    ) -> tuple[Handler, Pass] | None:
        name = field.name
        repeated = rules.repeated if rules is not None and rules.WhichOneof("type") == "repeated" else None
        counts = pgv.count_tests("repeated", repeated) if repeated is not None else []
        unique = repeated is not None and repeated.unique
        item_rules = repeated.items if repeated is not None and repeated.HasField("items") else None
        item_value = self._value(field, item_rules)
        item, item_passes = self._value_check(item_value), self._value_pass(item_value)
        if not counts and not unique and item is None:
            return None

        def handle(values: Any, parent: Path, out: list[Violation], scope: Scope) -> None:
            if counts:
                size = len(values)
                for test in counts:
                    if test.fails(size):
                        out.append(Violation(path_text((parent, name, None)), test.rule, test.message))
            if unique:
                seen: set[Any] = set()
                for index, value in enumerate(values):
                    if value in seen:
                        text = "repeated value must contain unique items"
                        out.append(Violation(path_text((parent, name, index)), "repeated.unique", text))
                    seen.add(value)
            if item is not None:
                for index, value in enumerate(values):
                    item(value, (parent, name, index), out, scope)

        return handle, _repeated_pass(counts, unique, item_passes)

    def _map_checks(
        self, field: FieldDescriptor, rules: validate_pb2.FieldRules | None
    ) -> tuple[Handler, Pass] | None:
        name = field.name
        entry = field.message_type
        map_rules = rules.map if rules is not None and rules.WhichOneof("type") == "map" else None
        counts = pgv.count_tests("map", map_rules) if map_rules is not None else []
        key_rules = map_rules.keys if map_rules is not None and map_rules.HasField("keys") else None
        value_rules = map_rules.values if map_rules is not None and map_rules.HasField("values") else None
        key_value = self._value(entry.fields_by_name["key"], key_rules)
        value_value = self._value(entry.fields_by_name["value"], value_rules)
        key_check, key_passes = self._value_check(key_value), self._value_pass(key_value)
        value_check, value_passes = self._value_check(value_value), self._value_pass(value_value)
        if not counts and key_check is None and value_check is None:
            return None

        def handle(values: Any, parent: Path, out: list[Violation], scope: Scope) -> None:
            for test in counts:
                if test.fails(len(values)):
                    out.append(Violation(path_text((parent, name, None)), test.rule, test.message))
            for key in sorted(values):  # deterministic order for reports
                place = (parent, name, key)
                if key_check is not None:
                    key_check(key, place, out, scope)
                if value_check is not None:
                    value_check(values[key], place, out, scope)

        return handle, _map_pass(counts, key_passes, value_passes)

    @staticmethod
    def _when_unset(field: FieldDescriptor, rules: validate_pb2.FieldRules | None) -> list[tuple[str, str]]:
        """(rule, message) of what an unset ``field`` breaks: PGV checks proto3 scalars, counts and
        required messages whether set or not; oneof members and optional fields only when set."""
        if rules is None and not _disallowed_enum_values(field):
            return []
        kind = rules.WhichOneof("type") if rules is not None else None
        if field.is_repeated:
            kind_rules = getattr(rules, kind) if rules is not None and kind in ("repeated", "map") else None
            tests = pgv.count_tests(kind, kind_rules) if kind_rules is not None and kind else []
            return [(t.rule, t.message) for t in tests if t.fails(0)]
        if field.containing_oneof is not None:
            return []  # real oneof members and proto3 optional fields: checked only when set
        if field.message_type is not None:
            if rules is None:
                return []
            if rules.HasField("message") and rules.message.required:
                wrapped = field.message_type.full_name in _WRAPPERS and kind not in (None, "message")
                text = "value is required and must not be nil." if wrapped else "value is required"
                return [("message.required", text)]
            if kind in ("duration", "timestamp", "any") and getattr(rules, kind).required:
                return [(f"{kind}.required", "value is required")]
            return []
        tests = pgv.scalar_tests(kind, getattr(rules, kind), field.enum_type) if kind and rules else []
        banned = _disallowed_enum_values(field)
        if banned:
            tests.append(_disallowed_enum_test(field, banned))
        default = field.default_value
        return [(t.rule, t.message) for t in tests if t.fails(default)]

    # -- Any ----------------------------------------------------------------------------------------

    def _check_any(self, value: Any, path: Path, out: list[Violation], scope: Scope) -> None:
        found = self._any_found(value, scope, 0)
        if found:
            _extend_at(out, path, found)

    def _any_passes(self, value: Any, scope: Scope, depth: int) -> bool:
        return not self._any_found(value, scope, depth)

    def _any_found(self, value: Any, scope: Scope, depth: int) -> tuple[Violation, ...]:
        """The findings in an Any's payload, relative to the Any (none when its type is unknown)."""
        target = self._any_target(value.type_url)
        if target is None:
            return ()
        # The same payload recurs (one rate limit or filter config on many routes): its findings,
        # relative to the Any, are kept by its bytes, so it is decoded and walked once.
        key = (value.type_url, value.value, scope)
        found = self._any_results.get(key)
        if found is None:
            found = self._payload_violations(target, value.value, scope, depth)
            if len(self._any_results) >= _ANY_RESULTS_MAX:
                self._any_results.clear()  # a crude bound; the next payloads refill it
            self._any_results[key] = found
        return found

    @staticmethod
    def _payload_violations(
        target: tuple[type[Message], Plan], payload: bytes, scope: Scope, depth: int
    ) -> tuple[Violation, ...]:
        cls, plan = target
        inner = cls()
        try:
            inner.ParseFromString(payload)
        except DecodeError:
            return (Violation("", "any.decode", f"cannot be decoded as {cls.DESCRIPTOR.full_name}"),)
        if _passes(inner, plan, scope, depth):
            return ()
        out: list[Violation] = []
        _walk(inner, plan, None, out, scope)
        return tuple(out)

    def _any_target(self, type_url: str) -> tuple[type[Message], Plan] | None:
        try:
            return self._anys[type_url]
        except KeyError:
            pass
        target: tuple[type[Message], Plan] | None = None
        try:
            descriptor = descriptor_pool.Default().FindMessageTypeByName(type_url.rpartition("/")[2])
        except (KeyError, TypeError):
            descriptor = None  # a type this process never imported: nothing known to check
        if descriptor is not None and self.is_active(descriptor):
            target = (message_factory.GetMessageClass(descriptor), self.plan(descriptor))
        self._anys[type_url] = target
        return target


def _repeated_pass(counts: Sequence[pgv.Test], unique: bool, item_passes: Pass | None) -> Pass:
    if not counts and not unique and item_passes is not None:
        return each(item_passes)
    count_fails = tuple(test.fails for test in counts)

    def passes(values: Any, scope: Scope, depth: int) -> bool:
        if count_fails:
            size = len(values)
            for fails in count_fails:
                if fails(size):
                    return False
        if unique:
            seen: set[Any] = set()
            for value in values:
                if value in seen:
                    return False
                seen.add(value)
        if item_passes is not None:
            for value in values:
                if not item_passes(value, scope, depth):
                    return False
        return True

    return passes


def _map_pass(counts: Sequence[pgv.Test], key_passes: Pass | None, value_passes: Pass | None) -> Pass:
    count_fails = tuple(test.fails for test in counts)

    def passes(values: Any, scope: Scope, depth: int) -> bool:
        for fails in count_fails:
            if fails(len(values)):
                return False
        for key in values:
            if key_passes is not None and not key_passes(key, scope, depth):
                return False
            if value_passes is not None and not value_passes(values[key], scope, depth):
                return False
        return True

    return passes


def _unset_test(field: FieldDescriptor) -> Callable[[Any, str], bool]:
    """Whether a field is unset (or, for a proto3 scalar, holds its default, which is the same)."""
    if field.is_repeated:
        return lambda message, name: not getattr(message, name)
    if field.message_type is not None:
        return lambda message, name: not message.HasField(name)
    default = field.default_value
    return lambda message, name: bool(getattr(message, name) == default)


def _disallowed_check(field: FieldDescriptor) -> Check:
    text = f"{field.full_name} is deprecated and disallowed by default"

    def check(value: Any, path: Path, out: list[Violation], scope: Scope) -> None:
        out.append(Violation(path_text(path), "envoy.disallowed_by_default", text))

    return check


def _disallowed_enum_test(field: FieldDescriptor, banned: frozenset[int]) -> pgv.Test:
    names = ", ".join(field.enum_type.values_by_number[n].name for n in sorted(banned))
    text = f"value is deprecated and disallowed by default ({names})"
    return pgv.Test(lambda v: v in banned, "envoy.disallowed_by_default_enum", text)


@functools.cache
def default_checker() -> Checker:
    """The process-wide checker with Envoy's rules (plans are compiled on first use)."""
    return Checker()


def violations(message: Message) -> list[Violation]:
    """Everything Envoy would refuse in ``message`` (see :class:`Checker`)."""
    return default_checker().violations(message)


def pass_check(descriptor: Descriptor) -> Callable[[Message], bool]:
    """Whether a message of this type surely breaks no rule (its pass check, see _passes): for a
    caller checking many messages of one type (every route of a build), with none of the
    dispatch of :func:`violations` per message.  False means "maybe not": ask violations."""
    plan = default_checker().plan(descriptor)
    if not plan.active:
        return lambda message: True

    def passes(message: Message) -> bool:
        try:
            return plan.check(message, _TOP, 0)
        except RecursionError:
            return False  # violations walks it

    return passes


def parts_pass_check(
    descriptor: Descriptor, fields: Sequence[str]
) -> Callable[[Message, Sequence[bytes]], bool]:
    """:func:`pass_check` for messages of this type whose set fields are exactly ``fields`` (message
    fields), given with those fields' encodings: each part is looked up by its bytes in the walk's
    memo (as its type's check would look it up) instead of being read from the message, listed and
    serialised again, and checked only when not found; the type's own rules are checked as its
    pass check does.  Most routes are such messages (a match and a cluster), whose parts repeat."""
    plan = default_checker().plan(descriptor)
    if not plan.active:
        return lambda message, encodings: True
    # (position in ``fields``, check) of the fields with a check: this runs for every route.
    parts = [
        (i, check)
        for i, name in enumerate(fields)
        if (check := _part_check(plan, descriptor.fields_by_name[name]))
    ]
    # A semantic rule reading only fields not among ``fields`` finds nothing (no route removing
    # headers): left out rather than called for every route.
    reads, given = semantic.RULE_FIELDS, frozenset(fields)
    rules = [rule for rule in plan.rules if rule not in reads or reads[rule] & given]
    own = compile_pass(descriptor, plan, None, _PASS_DEPTH, own_only=True, rules=rules)
    scope_rule = plan.scope

    def passes(message: Message, encodings: Sequence[bytes]) -> bool:
        try:
            scope = _TOP if scope_rule is None else scope_rule(message, _TOP)
            for i, check in parts:
                if not check(message, encodings[i], scope):
                    return False
            return own(message, scope, 0)
        except RecursionError:
            return False  # violations walks it

    return passes


# A set message field's pass check from the message and the field's encoding, in a scope.
_PartCheck = Callable[[Message, bytes, Scope], bool]


def _part_check(plan: Plan, field: FieldDescriptor) -> _PartCheck | None:
    """A field's check as its type's pass check makes it (at depth 1); one that only enters the
    field's type looks its encoding up in the walk's memo first (a hit counted as that type's
    check counts it) and checks the parsed part only when not found."""
    check = plan.passes.get(field)
    if check is None:
        return None
    sub = entered_plan(check)
    if not isinstance(sub, Plan):
        name, whole = field.name, check
        return lambda message, data, scope: whole(getattr(message, name), scope, 1)
    entered, parse = sub, message_factory.GetMessageClass(field.message_type).FromString

    def part_check(message: Message, data: bytes, scope: Scope) -> bool:
        memo = entered.memo
        if memo is not None:
            found = memo.get((entered, data, scope))
            if found is not None:
                entered.hits += 1
                return not found
        return entered.check(parse(data), scope, 1)

    return part_check


def resource_violations(type_url: str, payload: bytes) -> list[Violation]:
    """The violations of a serialised xDS resource of ``type_url`` (as the caches hold them)."""
    message = message_class(type_url)()
    try:
        message.ParseFromString(payload)
    except DecodeError:
        return [Violation("", "protobuf.decode", f"cannot be decoded as {message.DESCRIPTOR.full_name}")]
    return violations(message)
