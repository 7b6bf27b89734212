"""Render docs/hooks.md from the hookspec docstrings and record classes (so they cannot drift).

python -m cpx.hookdocs > docs/hooks.md
"""

from __future__ import annotations

import inspect

import attrs

from cpx import hookspecs, records
from cpx.sources.view import SourceView

PROTOCOLS = (
    records.Processor,
    records.Observer,
    records.ResourceCache,
    records.CheckingCache,
    records.SourceBound,
    records.EndpointsObserver,
)
RECORDS = (
    records.WatchSpec,
    records.ProcessorSpec,
    records.ResourceCacheSpec,
    records.StatusWriterSpec,
    records.OptionSpec,
    records.ListenerKindSpec,
    records.ClusterKindSpec,
    records.HttpFilterSpec,
    records.FilterSite,
    records.RouteSite,
)


def _type_name(field: attrs.Attribute) -> str:  # type: ignore[type-arg]
    return str(field.type).replace("\n", " ") if field.type is not None else "?"


def _default_text(default: object) -> str:
    if default is attrs.NOTHING:
        return "required"
    if inspect.isfunction(default):
        return inspect.getdoc(default) or default.__name__  # a repr would show an address
    return repr(default)


def _shown(name: str, member: object) -> bool:
    return not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))


def _member_line(name: str, member: object) -> str:
    """``- `name(args) -> result`: doc`` for a method, ``- `name`: doc`` for a property."""
    function = member.fget if isinstance(member, property) else member
    assert callable(function)
    shown = name
    if not isinstance(member, property):
        signature = str(inspect.signature(function)).replace("'", "")
        shown += signature.replace("(self, ", "(").replace("(self)", "()")
    doc = (inspect.getdoc(function) or "").replace("\n", " ")
    return f"- `{shown}`" + (f": {doc}" if doc else "")


def render() -> str:
    lines = [
        "# cpx plugin hooks",
        "",
        "Generated from `core/cpx/hookspecs.py` and `core/cpx/records.py` by `python -m cpx.hookdocs`;",
        "a test fails when this file and the code disagree.",
        "",
        inspect.getdoc(hookspecs) or "",
        "",
        "## Hooks",
        "",
    ]
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if not name.startswith("cpx_"):
            continue
        params = ", ".join(inspect.signature(fn).parameters)
        opts = getattr(fn, "cpx_spec", {}) or {}
        flags = [k for k in ("firstresult", "historic") if opts.get(k)]
        lines += [
            f"### `{name}({params})`" + (f" ({', '.join(flags)})" if flags else ""),
            "",
            inspect.getdoc(fn) or "",
            "",
        ]
    lines += ["## Protocols", "", "What the objects a plugin's records build must provide.", ""]
    for protocol in (*PROTOCOLS, SourceView):
        lines += [f"### {protocol.__name__}", "", inspect.getdoc(protocol) or "", ""]
        lines += [
            _member_line(name, member) for name, member in vars(protocol).items() if _shown(name, member)
        ]
        lines.append("")
    lines += ["## Records", "", inspect.getdoc(records) or "", ""]
    for record in RECORDS:
        lines += [
            f"### {record.__name__}",
            "",
            inspect.getdoc(record) or "",
            "",
            "| field | type | default |",
            "|---|---|---|",
        ]
        for field in attrs.fields(record):
            default = _default_text(field.default)
            lines.append(f"| `{field.name}` | `{_type_name(field)}` | {default} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
