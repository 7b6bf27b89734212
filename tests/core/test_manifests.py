from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from cpx.errors import ManifestError
from cpx.objects import ObjectKey
from cpx.sources.manifests import ManifestSet, expand, is_manifest, load_documents, parse_file

SERVICE = (
    "apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: default}\nspec: {ports: [{port: 80}]}\n"
)


def test_multi_document_file_and_list_kind(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    listed = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: two}}\n"
    f.write_text(SERVICE % "one" + "---\n" + listed + "---\n")
    objects, errors = parse_file(f)
    assert [o["metadata"]["name"] for o in objects] == ["one", "two"]
    assert errors == []


def test_bad_document_is_reported_with_file_and_index_and_others_load(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    f.write_text(SERVICE % "one" + "---\nkind: Service\nmetadata: {name: x}\n---\n- just a list\n")
    objects, errors = parse_file(f)
    assert [o["metadata"]["name"] for o in objects] == ["one"]
    assert [str(e) for e in errors] == [
        f"{f} (document 2): missing apiVersion",
        f"{f} (document 3): expected a mapping (a Kubernetes object), got list",
    ]


def test_malformed_yaml_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("apiVersion: v1\nkind: [unclosed\n")
    with pytest.raises(ManifestError, match=r"bad\.yaml: malformed YAML"):
        parse_file(f)


def test_dotfiles_and_editor_files_are_ignored(tmp_path: Path) -> None:
    for name in ("a.yaml", ".a.yaml.tmp", ".hidden.yaml", "b.yml~", "#c.yaml#", "d.yaml.swp", "notes.txt"):
        (tmp_path / name).write_text(SERVICE % "x")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.yaml").write_text(SERVICE % "y")
    assert [p.name for p in expand([tmp_path])] == ["a.yaml"]
    assert not is_manifest(Path(".a.yaml"))


def test_files_come_sorted_by_path_parts_and_once(tmp_path: Path) -> None:
    names = [
        "a.yaml",
        "a/x.yaml",
        "a/b/y.yml",
        "a-b.yaml",
        "a.b/z.json",
        "B.yaml",
        "b/c.yaml",
        "_/x.yaml",
        "ä.yaml",
    ]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(SERVICE % "x")
    expected = sorted((tmp_path / name for name in names), key=lambda p: p.parts)
    assert expand([tmp_path]) == expected  # one folder: its walk's order
    assert expand([tmp_path / "a", tmp_path, tmp_path / "B.yaml"]) == expected  # several: merged


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no such file"):
        expand([tmp_path / "nope"])


def test_manifest_set_diffs_a_file() -> None:
    s = ManifestSet()
    one = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "one", "namespace": "default"}}
    two = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "two", "namespace": "default"}}
    assert s.replace_file(Path("a"), [one, two]) == ([one, two], [])
    changed = {**two, "spec": {"x": 1}}
    assert s.replace_file(Path("a"), [changed]) == ([changed], [one])
    # An object also held by another file is not deleted when one file drops it.
    s.replace_file(Path("b"), [changed])
    assert s.remove_file(Path("a")) == ([], [])
    # When the file whose version was served drops an object another file holds differently,
    # the other version is applied instead of the object lingering or being deleted.
    other = {**two, "spec": {"x": 2}}
    s.replace_file(Path("c"), [other])
    assert s.remove_file(Path("b")) == ([other], [])
    assert [ObjectKey.of(o).name for o in s.objects()] == ["two"]


def test_alias_expansion_is_bounded(tmp_path: Path) -> None:
    """An 11 KB file must not become a million values for every later step to walk."""
    inner = "[" + ", ".join(["x"] * 1000) + "]"
    outer = "[" + ", ".join(["*a"] * 1000) + "]"
    f = tmp_path / "laughs.yaml"
    f.write_text(f"{SERVICE % 'one'}---\nkind: Service\na: &a {inner}\nb: {outer}\n")
    started = time.perf_counter()
    with pytest.raises(ManifestError, match=r"laughs\.yaml: malformed YAML: document 2: aliases expand"):
        parse_file(f)
    assert time.perf_counter() - started < 1.0


def test_recursive_aliases_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "loop.yaml"
    f.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: &s {self: *s}\n")
    with pytest.raises(ManifestError, match="an alias refers to a node that contains it"):
        parse_file(f)


def test_modest_aliases_and_ampersands_still_load(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    f.write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: x, annotations: {q: 'a&b'}}\n"
        "spec: {ports: [&p {port: 80}, *p]}\n"
    )
    [obj], errors = parse_file(f)
    assert errors == [] and obj["spec"]["ports"] == [{"port": 80}, {"port": 80}]


def test_an_object_in_two_files_is_served_from_the_first_whatever_the_order() -> None:
    first = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"x": 1}}
    second = {**first, "spec": {"x": 2}}
    key = ObjectKey.of(first)
    for order in ([("a", first), ("b", second)], [("b", second), ("a", first)]):
        s = ManifestSet()
        applied = [s.replace_file(Path(name), [obj]) for name, obj in order]
        assert s.served(key) == first and list(s.holders(key)) == [Path("a"), Path("b")]
        # The last change applied is what the pipeline holds: a's version either way.
        assert [upserts for upserts, _deletes in applied if upserts][-1] == [first]
    assert s.remove_file(Path("a")) == ([second], [])
    assert s.remove_file(Path("b")) == ([], [second])
    assert s.holders(key) == ()


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: yes\nc: ~\nd: 1.5\ne: 0o17\nf: 2024-01-02\ng: '3'\nh: [x, {i: j}]\n---\n- 1\n- z\n",
        "<<: {a: 1}\nb: 2\n",  # a merge key without anchors
        "? 1.5\n: x\n",  # a key that is not a string
        "1: one\ntrue: yes\nnull: nothing\n",
        "a: !!binary aGk=\nb: !!str 12\nc: !!float 1\nd: !!set {x}\n",
        "=: value\n",
        "- !!omap [{a: 1}]\n",
        "",
        "---\n---\nx\n",
    ],
)
def test_fast_loading_builds_what_the_safe_loader_builds(text: str) -> None:
    assert load_documents(text) == list(yaml.load_all(text, Loader=yaml.SafeLoader))


@pytest.mark.parametrize(
    "text", ["a: !custom 1\n", "a: !!int x\n", "a: 1\n a: 2\n", "? {a: 1}\n: x\n", "? [1]\n: x\n"]
)
def test_fast_loading_refuses_what_the_safe_loader_refuses(text: str) -> None:
    with pytest.raises((yaml.YAMLError, ValueError)) as safe:
        list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    with pytest.raises((yaml.YAMLError, ValueError)) as fast:
        load_documents(text)
    assert str(fast.value) == str(safe.value)  # the same message, place (line, column) included


def test_fast_loading_of_a_document_nested_past_pythons_stack() -> None:
    text = "a: " + "[" * 990 + "x" + "]" * 990 + "\n"
    [doc] = load_documents(text)
    value, depth = doc["a"], 0
    while isinstance(value, list):  # not ==: comparing such values exhausts the stack too
        [value], depth = value, depth + 1
    assert (depth, value) == (990, "x")
