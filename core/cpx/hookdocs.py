"""Render docs/hooks.md from the hookspec docstrings and record classes (so they cannot drift).

python -m cpx.hookdocs > docs/hooks.md
"""

from __future__ import annotations

import inspect

import attrs

from cpx import hookspecs, records

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
