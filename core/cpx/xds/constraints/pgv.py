"""protoc-gen-validate rules, read from field options, compiled into value tests.

Each ``validate.rules`` kind becomes a tuple of :class:`Test`: a predicate that is true when a value
breaks the rule, the rule's name and the message Envoy's generated C++ validators print (the
wording of PGV's ``templates/cc``). Only what Envoy's C++ build of PGV evaluates matters; where
PGV's C++ templates leave a rule unimplemented (email, URI, bytes IP, timestamp ranges), no Envoy
proto can carry it, and the Go templates' meaning is followed.
"""

from __future__ import annotations

import math
import re
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs
import re2
from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.message import Message
from validate import validate_pb2

_NANOS = 1_000_000_000
# google.protobuf.Duration's own range (protobuf's kDurationMaxSeconds).
MAX_DURATION_SECONDS = 315_576_000_000

# PGV's module/checker.go: what ``well_known_regex`` stands for.
_HEADER_NAME = "^:?[0-9a-zA-Z!#$%&'*+-.^_|~\x60]+$"
_HEADER_VALUE = "^[^\u0000-\u0008\u000a-\u001f\u007f]*$"
_HEADER_STRING = "^[^\u0000\u000a\u000d]*$"  # strict: false, for names and values alike
_UUID = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

# Pure-Python forms of the well-known patterns (a C call to RE2 costs microseconds, a character
# class search a fraction of that); tests check they agree with RE2 on every character.
_HEADER_NAME_PY = re.compile(r":?[0-9a-zA-Z!#$%&'*+,\-.^_|~`]+")
_HEADER_VALUE_BAD = re.compile("[\x00-\x08\x0a-\x1f\x7f]")
_FAST: dict[str, Callable[[str], bool]] = {
    _HEADER_STRING: lambda v: "\x00" in v or "\n" in v or "\r" in v,
    _HEADER_VALUE: lambda v: _HEADER_VALUE_BAD.search(v) is not None,
    # RE2 reads ``+-.`` in the class as the range + , - .
    _HEADER_NAME: lambda v: _HEADER_NAME_PY.fullmatch(v) is None,
}


@attrs.frozen
class Test:
    """One rule on one value: ``fails(value)`` is true when the value breaks it."""

    fails: Callable[[Any], bool]
    rule: str
    message: str


Tests = tuple[Test, ...]


def re2_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a bad tenant regex must not write to cpx's stderr
    return options


def full_match(pattern: str | bytes) -> Callable[[Any], bool]:
    """A predicate true when the value does NOT fully match ``pattern`` (RE2, as PGV's C++ uses)."""
    if isinstance(pattern, str) and pattern in _FAST:
        return _FAST[pattern]
    compiled = re2.compile(pattern, re2_options())._regexp  # the raw RE2: 10x cheaper per call
    both = re2._Anchor.ANCHOR_BOTH
    null = re2._NULL_SPAN

    def mismatch(value: str | bytes) -> bool:
        data = value.encode() if isinstance(value, str) else value
        return bool(compiled.Match(both, data, 0, len(data))[0] == null)

    return mismatch


# -- well-known string formats (PGV's validate.h) ---------------------------------------------------


def is_ip(value: str, family: int | None = None) -> bool:
    """inet_pton, as PGV's IsIp: no scope ids, no leading zeros, no shorthand forms."""
    families = (family,) if family is not None else (socket.AF_INET, socket.AF_INET6)
    for fam in families:
        try:
            socket.inet_pton(fam, value)
        except (OSError, ValueError):
            continue
        return True
    return False


_LABEL = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def is_hostname(value: str) -> bool:
    """PGV's C++ IsHostname: dot-separated labels of 1-63 letters, digits and inner hyphens."""
    if len(value) > 253:
        return False
    labels = value.split(".")
    if labels and labels[-1] == "":
        labels.pop()  # std::sregex_token_iterator yields no empty trailing token
    return all(
        0 < len(label) <= 63 and label[0] != "-" and label[-1] != "-" and set(label) <= _LABEL
        for label in labels
    )


def _is_email(value: str) -> bool:
    local, at, domain = value.rpartition("@")
    return bool(at) and 0 < len(local) <= 64 and len(value) <= 254 and is_hostname(domain)


def _is_uri(value: str, absolute: bool) -> bool:
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return bool(parts.scheme) or not absolute


# -- literals in messages ---------------------------------------------------------------------------


def _lit(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.encode("unicode_escape").decode().replace('"', '\\"') + '"'
    if isinstance(value, bytes):
        return '"' + value.decode("latin-1").encode("unicode_escape").decode() + '"'
    return str(value)


def _list(values: Iterable[Any]) -> str:
    return "[" + " ".join(str(v) for v in values) + "]"


def nanos(duration: Message) -> int:
    return int(duration.seconds) * _NANOS + int(duration.nanos)


def duration_text(total_nanos: int) -> str:
    seconds, rest = divmod(total_nanos, _NANOS)
    return f"{seconds}s" if not rest else f"{total_nanos / _NANOS:g}s"


# -- ranges (PGV's ltgt template, shared by numbers, durations and timestamps) ------------------------


def _range_tests(
    kind: str, rules: Message, key: Callable[[Any], Any], show: Callable[[Any], str]
) -> list[Test]:
    """const, lt/lte/gt/gte (inside or outside a range, as PGV reads them), in and not_in."""
    has = rules.HasField
    tests: list[Test] = []
    if has("const"):
        const = key(rules.const)
        tests.append(Test(lambda v: v != const, f"{kind}.const", f"value must equal {show(const)}"))
    upper = ("lt", key(rules.lt)) if has("lt") else ("lte", key(rules.lte)) if has("lte") else None
    lower = ("gt", key(rules.gt)) if has("gt") else ("gte", key(rules.gte)) if has("gte") else None
    if upper is not None and lower is not None:
        tests.append(_between(kind, upper, lower, show))
    elif upper is not None:
        bound = upper[1]
        if upper[0] == "lt":
            tests.append(
                Test(
                    lambda v: v >= bound,
                    f"{kind}.lt: {show(bound)}",
                    f"value must be less than {show(bound)}",
                )
            )
        else:
            tests.append(
                Test(
                    lambda v: v > bound,
                    f"{kind}.lte: {show(bound)}",
                    f"value must be less than or equal to {show(bound)}",
                )
            )
    elif lower is not None:
        bound = lower[1]
        if lower[0] == "gt":
            tests.append(
                Test(
                    lambda v: v <= bound,
                    f"{kind}.gt: {show(bound)}",
                    f"value must be greater than {show(bound)}",
                )
            )
        else:
            tests.append(
                Test(
                    lambda v: v < bound,
                    f"{kind}.gte: {show(bound)}",
                    f"value must be greater than or equal to {show(bound)}",
                )
            )
    tests.extend(_membership(kind, rules, key, show))
    return tests


def _between(kind: str, upper: tuple[str, Any], lower: tuple[str, Any], show: Callable[[Any], str]) -> Test:
    (u_name, u), (l_name, low) = upper, lower
    u_open, l_open = u_name == "lt", l_name == "gt"
    rule = f"{kind}.{l_name}: {show(low)}, {kind}.{u_name}: {show(u)}"

    def above(v: Any) -> bool:  # v beyond the upper bound
        return bool(v >= u) if u_open else bool(v > u)

    def below(v: Any) -> bool:  # v beyond the lower bound
        return bool(v <= low) if l_open else bool(v < low)

    if u > low:
        opening, closing = "(" if l_open else "[", ")" if u_open else "]"
        text = f"value must be inside range {opening}{show(low)}, {show(u)}{closing}"
        return Test(lambda v: above(v) or below(v), rule, text)
    # An upper bound below the lower one: the value must lie outside [upper, lower].
    text = (
        f"value must be outside range {'[' if u_open else '('}{show(u)}, {show(low)}{']' if l_open else ')'}"
    )
    return Test(lambda v: above(v) and below(v), rule, text)


def _membership(
    kind: str, rules: Message, key: Callable[[Any], Any], show: Callable[[Any], str]
) -> list[Test]:
    tests: list[Test] = []
    listed = getattr(rules, "in", ())
    if listed:
        allowed = frozenset(key(v) for v in listed)
        text = "value must be in list " + _list(show(key(v)) for v in listed)
        tests.append(Test(lambda v: v not in allowed, f"{kind}.in", text))
    elif getattr(rules, "not_in", ()):
        banned = frozenset(key(v) for v in rules.not_in)
        text = "value must not be in list " + _list(show(key(v)) for v in rules.not_in)
        tests.append(Test(lambda v: v in banned, f"{kind}.not_in", text))
    return tests


def ignore_empty(tests: Sequence[Test], empty: Any) -> list[Test]:
    return [attrs.evolve(t, fails=_unless_empty(t.fails, empty)) for t in tests]


def _unless_empty(fails: Callable[[Any], bool], empty: Any) -> Callable[[Any], bool]:
    return lambda v: v != empty and fails(v)


def _on_nanos(tests: Iterable[Test]) -> list[Test]:
    """Tests written for integer nanoseconds, applied to Duration or Timestamp messages."""
    return [attrs.evolve(t, fails=_after(nanos, t.fails)) for t in tests]


def _after(key: Callable[[Any], Any], fails: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: fails(key(v))


# -- kinds ------------------------------------------------------------------------------------------


def _same(value: Any) -> Any:
    return value


def numeric_tests(kind: str, rules: Message) -> list[Test]:
    show = _float_text if kind in ("float", "double") else str
    tests = _range_tests(kind, rules, _same, show)
    return ignore_empty(tests, 0) if getattr(rules, "ignore_empty", False) else tests


def _float_text(value: float) -> str:
    return repr(value) if not math.isfinite(value) or not value.is_integer() else str(int(value))


def _byte_len(value: str) -> int:
    return len(value) if value.isascii() else len(value.encode())


_CHARS = ("len", "min_len", "max_len")
_BYTES = ("len_bytes", "min_bytes", "max_bytes")


def _length_tests(
    kind: str, rules: Any, count: Callable[[Any], int], names: tuple[str, str, str]
) -> list[Test]:
    """len/min/max of ``count(value)``: characters (string ``*_len``) or bytes (``*_bytes``, bytes)."""
    chars = kind == "string" and names == _CHARS
    exact_name, min_name, max_name = names
    exact, low, high = (getattr(rules, n) if rules.HasField(n) else None for n in names)
    if exact is None and low is not None and low == high:
        exact, exact_name = low, min_name
    if exact is not None:
        n = exact
        text = f"value must be {n} characters" if chars else f"value length must be {n} bytes"
        return [Test(lambda v: count(v) != n, f"{kind}.{exact_name}: {n}", text)]
    unit = "characters" if chars else "bytes"
    if low is not None and high is not None:
        lo, hi = low, high
        text = (
            f"value must have between {lo} and {hi} characters inclusive"
            if chars
            else f"value length must be between {lo} and {hi} bytes, inclusive"
        )
        rule = f"{kind}.{min_name}: {lo}, {kind}.{max_name}: {hi}"
        return [Test(lambda v: not lo <= count(v) <= hi, rule, text)]
    if low is not None:
        lo = low
        text = f"value length must be at least {lo} {unit}"
        return [Test(lambda v: count(v) < lo, f"{kind}.{min_name}: {lo}", text)]
    if high is not None:
        hi = high
        text = f"value length must be at most {hi} {unit}"
        return [Test(lambda v: count(v) > hi, f"{kind}.{max_name}: {hi}", text)]
    return []


def _affix_tests(kind: str, rules: Message) -> list[Test]:
    has = rules.HasField
    tests: list[Test] = []
    if has("prefix"):
        p = rules.prefix
        tests.append(
            Test(lambda v: not v.startswith(p), f"{kind}.prefix", f"value does not have prefix {_lit(p)}")
        )
    if has("suffix"):
        s = rules.suffix
        tests.append(
            Test(lambda v: not v.endswith(s), f"{kind}.suffix", f"value does not have suffix {_lit(s)}")
        )
    if has("contains"):
        c = rules.contains
        tests.append(
            Test(lambda v: c not in v, f"{kind}.contains", f"value does not contain substring {_lit(c)}")
        )
    if kind == "string" and has("not_contains"):
        n = rules.not_contains
        tests.append(Test(lambda v: n in v, f"{kind}.not_contains", f"value contains substring {_lit(n)}"))
    return tests


def string_tests(rules: validate_pb2.StringRules) -> list[Test]:
    tests = _range_like_const_in("string", rules)
    tests += _length_tests("string", rules, len, _CHARS)
    tests += _length_tests("string", rules, _byte_len, _BYTES)
    tests += _affix_tests("string", rules)
    pattern, rule = _string_pattern(rules)
    if pattern is not None:
        tests.append(Test(full_match(pattern), rule, f"value does not match regex pattern {_lit(pattern)}"))
    well_known = rules.WhichOneof("well_known")
    if well_known in _FORMATS and getattr(rules, well_known):
        fails, text = _FORMATS[well_known]
        tests.append(Test(fails, f"string.{well_known}", text))
    return ignore_empty(tests, "") if rules.ignore_empty else tests


def _string_pattern(rules: validate_pb2.StringRules) -> tuple[str | None, str]:
    if rules.WhichOneof("well_known") == "well_known_regex" and rules.well_known_regex:
        name = validate_pb2.KnownRegex.Name(rules.well_known_regex)
        if not rules.strict:  # ``strict`` defaults to true (proto2 default)
            return _HEADER_STRING, f"string.well_known_regex: {name} (not strict)"
        pattern = _HEADER_NAME if name == "HTTP_HEADER_NAME" else _HEADER_VALUE
        return pattern, f"string.well_known_regex: {name} (strict)"
    if rules.HasField("pattern"):
        return rules.pattern, f"string.pattern: {rules.pattern}"
    return None, ""


_FORMATS: dict[str, tuple[Callable[[str], bool], str]] = {
    "ip": (lambda v: not is_ip(v), "value must be a valid IP Address"),
    "ipv4": (lambda v: not is_ip(v, socket.AF_INET), "value must be a valid IPv4 Address"),
    "ipv6": (lambda v: not is_ip(v, socket.AF_INET6), "value must be a valid IPv6 Address"),
    "address": (lambda v: not is_hostname(v) and not is_ip(v), "value must be an ip address, or a hostname."),
    "hostname": (lambda v: not is_hostname(v), "value must be a valid hostname"),
    "email": (lambda v: not _is_email(v), "value must be a valid email address"),
    "uri": (lambda v: not _is_uri(v, absolute=True), "value must be a valid absolute URI"),
    "uri_ref": (lambda v: not _is_uri(v, absolute=False), "value must be a valid URI"),
    "uuid": (full_match(_UUID), "value must be a valid UUID"),
}


def _range_like_const_in(kind: str, rules: Message) -> list[Test]:
    """const, in and not_in: the parts of the range template strings and bytes share."""
    tests: list[Test] = []
    if rules.HasField("const"):
        const = rules.const
        tests.append(Test(lambda v: v != const, f"{kind}.const", f"value must equal {_lit(const)}"))
    return tests + _membership(kind, rules, _same, _lit)


def bytes_tests(rules: validate_pb2.BytesRules) -> list[Test]:
    tests = _range_like_const_in("bytes", rules)
    tests += _length_tests("bytes", rules, len, _CHARS)
    tests += _affix_tests("bytes", rules)
    if rules.HasField("pattern"):
        pattern = rules.pattern.encode()
        tests.append(
            Test(
                full_match(pattern),
                f"bytes.pattern: {rules.pattern}",
                f"value does not match regex pattern {_lit(rules.pattern)}",
            )
        )
    return ignore_empty(tests, b"") if rules.ignore_empty else tests


def bool_tests(rules: validate_pb2.BoolRules) -> list[Test]:
    if not rules.HasField("const"):
        return []
    const = rules.const
    return [Test(lambda v: v != const, "bool.const", f"value must equal {str(const).lower()}")]


def enum_tests(rules: validate_pb2.EnumRules, enum: EnumDescriptor) -> list[Test]:
    def show(number: int) -> str:
        value = enum.values_by_number.get(number)
        return value.name if value is not None else str(number)

    tests = _range_like_enum(rules, show)
    if rules.defined_only:
        defined = frozenset(enum.values_by_number)
        tests.append(
            Test(
                lambda v: v not in defined,
                "enum.defined_only",
                "value must be one of the defined enum values",
            )
        )
    return tests


def _range_like_enum(rules: validate_pb2.EnumRules, show: Callable[[int], str]) -> list[Test]:
    tests: list[Test] = []
    if rules.HasField("const"):
        const = rules.const
        tests.append(Test(lambda v: v != const, "enum.const", f"value must equal {show(const)}"))
    return tests + _membership("enum", rules, _same, show)


def duration_tests(rules: validate_pb2.DurationRules) -> list[Test]:
    """PGV's duration template: a valid Duration first, then the comparisons (on nanoseconds)."""
    compared = _range_tests("duration", rules, nanos, duration_text)
    if not compared:
        return []
    valid = Test(lambda d: not duration_valid(d), "duration (valid)", "value is not a valid duration")
    return [valid, *_on_nanos(compared)]


def duration_valid(d: Any) -> bool:
    return bool(-_NANOS < d.nanos < _NANOS and -MAX_DURATION_SECONDS <= d.seconds <= MAX_DURATION_SECONDS)


def timestamp_tests(rules: validate_pb2.TimestampRules) -> list[Test]:
    """Timestamp comparisons (PGV's C++ leaves them unimplemented, so no Envoy proto uses them)."""
    tests = _on_nanos(_range_tests("timestamp", rules, nanos, str))
    window = nanos(rules.within) if rules.HasField("within") else None
    if rules.lt_now:
        tests.append(
            Test(
                lambda d: nanos(d) >= _now() or (window is not None and nanos(d) < _now() - window),
                "timestamp.lt_now",
                "value must be less than now",
            )
        )
    elif rules.gt_now:
        tests.append(
            Test(
                lambda d: nanos(d) <= _now() or (window is not None and nanos(d) > _now() + window),
                "timestamp.gt_now",
                "value must be greater than now",
            )
        )
    elif window is not None:
        tests.append(
            Test(
                lambda d: abs(nanos(d) - _now()) >= window,
                "timestamp.within",
                "value must be within range of now",
            )
        )
    return tests


def _now() -> int:
    return time.time_ns()


def any_tests(rules: validate_pb2.AnyRules) -> list[Test]:
    tests: list[Test] = []
    if listed := list(getattr(rules, "in")):
        allowed = frozenset(listed)
        tests.append(
            Test(lambda a: a.type_url not in allowed, "any.in", "type URL must be in list " + _list(allowed))
        )
    elif rules.not_in:
        banned = frozenset(rules.not_in)
        tests.append(
            Test(
                lambda a: a.type_url in banned, "any.not_in", "type URL must not be in list " + _list(banned)
            )
        )
    return tests


def count_tests(kind: str, rules: Any) -> list[Test]:
    """min/max items (repeated) or pairs (map), as PGV words them."""
    noun, low_name, high_name = (
        ("item", "min_items", "max_items") if kind == "repeated" else ("pair", "min_pairs", "max_pairs")
    )
    low = getattr(rules, low_name)
    high = getattr(rules, high_name) if rules.HasField(high_name) else None
    tests: list[Test] = []
    if low and low == high:
        tests.append(
            Test(
                lambda n: n != low,
                f"{kind}.{low_name}: {low}, {kind}.{high_name}: {high}",
                f"value must contain exactly {low} {noun}(s)",
            )
        )
    elif low and high is not None:
        tests.append(
            Test(
                lambda n: not low <= n <= high,
                f"{kind}.{low_name}: {low}, {kind}.{high_name}: {high}",
                f"value must contain between {low} and {high} {noun}s, inclusive",
            )
        )
    elif low:
        tests.append(
            Test(
                lambda n: n < low, f"{kind}.{low_name}: {low}", f"value must contain at least {low} {noun}(s)"
            )
        )
    elif high is not None:
        tests.append(
            Test(
                lambda n: n > high,
                f"{kind}.{high_name}: {high}",
                f"value must contain no more than {high} {noun}(s)",
            )
        )
    if rules.ignore_empty:
        tests = ignore_empty(tests, 0)
    return tests


_SCALAR_KINDS = frozenset(
    ("float", "double", "int32", "int64", "uint32", "uint64", "sint32", "sint64")
) | frozenset(("fixed32", "fixed64", "sfixed32", "sfixed64"))


def scalar_tests(kind: str, rules: Message, enum: EnumDescriptor | None = None) -> list[Test]:
    """The tests of one scalar rule kind (numbers, bool, string, bytes, enum)."""
    if kind in _SCALAR_KINDS:
        return numeric_tests(kind, rules)
    if kind == "string":
        return string_tests(rules)
    if kind == "bytes":
        return bytes_tests(rules)
    if kind == "bool":
        return bool_tests(rules)
    if kind == "enum" and enum is not None:
        return enum_tests(rules, enum)
    return []
