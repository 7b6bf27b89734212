"""The cache of attrs' compiled methods: classes made through it are the classes attrs makes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import attr._make
import attrs
import pytest

from cpx import attrscache


def _plain(script: str, globs: dict[str, Any] | None, locs: Any = None, filename: str = "") -> None:
    eval(compile(script, filename, "exec"), globs, locs)  # attrs' own _compile_and_eval


def _classes() -> tuple[type, ...]:
    """The same classes each call (same module and names: the same salt in their hashes)."""

    @attrs.frozen(cache_hash=True, kw_only=True)
    class Frozen:
        name: str
        hidden: bytes = attrs.field(repr=False, default=b"")
        items: tuple[int, ...] = ()

    @attrs.frozen
    class Plain:
        a: int
        b: str = "x"

    @attrs.define(eq=False)
    class Mutable:
        value: list[int] = attrs.field(factory=list)

    return Frozen, Plain, Mutable


def _behaviour(classes: tuple[type, ...]) -> list[Any]:
    frozen, plain, mutable = classes
    one = frozen(name="n", hidden=b"secret", items=(1, 2))
    two = plain(1)
    three = mutable()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        one.name = "m"
    return [
        repr(one),
        repr(two),
        repr(three),
        hash(one),
        hash(two),
        one == frozen(name="n", items=(1, 2)),
        two == plain(1, "x"),
        three == mutable(),
        attrs.asdict(one),
    ]


def test_classes_made_through_the_cache_behave_as_attrs_makes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(attr._make, "_compile_and_eval", _plain)
    expected = _behaviour(_classes())

    path = tmp_path / "cache.marshal"
    first = attrscache._Cache(path)
    monkeypatch.setattr(attr._make, "_compile_and_eval", first.compile_and_eval)
    assert _behaviour(_classes()) == expected
    assert first.compiled
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    first.write()

    again = attrscache._Cache(path)
    assert again.known.keys() == first.used.keys()
    monkeypatch.setattr(attr._make, "_compile_and_eval", again.compile_and_eval)
    assert _behaviour(_classes()) == expected
    assert not again.compiled  # every method came from the cache


def test_the_hash_salt_is_read_from_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached ``__hash__`` uses the salt attrs computed now, not the one of the run that wrote it."""
    cache = attrscache._Cache(tmp_path / "cache.marshal")
    script = "def __hash__(self):\n    return hash((\n        -17,\n        self.a,\n    ))\n"
    for salt in (-17, 42):
        globs: dict[str, Any] = {}
        cache.compile_and_eval(script.replace("-17", str(salt)), globs, None, "<attrs generated hash X>")
        holder = type("Holder", (), {"a": 5})()
        assert globs["__hash__"](holder) == hash((salt, 5))
    assert len(cache.used) == 1  # one normalised source for both salts


def test_an_unreadable_cache_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "cache.marshal"
    path.write_bytes(b"not marshal data")
    assert attrscache._Cache(path).known == {}
    assert attrscache._Cache(tmp_path / "missing").known == {}


def test_nothing_is_written_without_bytecode_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = attrscache._Cache(tmp_path / "cache.marshal")
    monkeypatch.setattr(attr._make, "_compile_and_eval", cache.compile_and_eval)
    _classes()
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    cache.write()
    assert not (tmp_path / "cache.marshal").exists()


def test_a_second_process_reads_what_the_first_wrote(tmp_path: Path) -> None:
    code = "import cpx, attr._make; print(attr._make._compile_and_eval.__self__.compiled)"
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": ""}
    runs = [
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    assert [run.stdout.strip() for run in runs] == ["True", "False"]
    assert list((tmp_path / "cpx").iterdir())
