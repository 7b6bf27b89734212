"""Golden ``cpx translate`` outputs: the examples, the object sets the unit tests build from
(``corpus/fixture-*.yaml``, captured once from the processors' and caches' tests), the manifests
the end-to-end tests serve (``corpus/e2e-*.yaml``) and a fixed
corpus of generated objects (``corpus/fuzz-*.yaml``).

The outputs pin translation byte for byte (status timestamps aside), so that a refactoring that
claims to change no behaviour can prove it.  Regenerate them only for an intended change::

    python tests/golden/test_golden.py --update          # rewrite expected/ from the current code
    python tests/golden/test_golden.py --new-corpus      # draw a new corpus (then --update)
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cpx.cli import cli

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"
EXPECTED = HERE / "expected"
PLUGINS = "ingress,httpproxy"
EXAMPLES = ("examples/httpproxy", "examples/ingress", "examples/quickstart")
MAX_CASE_BYTES = 40_000
_TIMESTAMP = re.compile(r'"lastTransitionTime": "[^"]*"')


def cases() -> dict[str, list[Path]]:
    """Case name -> the manifest paths translated together."""
    out = {Path(e).name: [ROOT / e] for e in EXAMPLES}
    for path in sorted(CORPUS.glob("*.yaml")):
        out[path.stem] = [path]
    return out


def translate(paths: list[Path]) -> str:
    # The cli group configures logging for the runner's stderr; keep it out of the output.
    result = CliRunner().invoke(cli, ["translate", "--plugins", PLUGINS, "-o", "json", *map(str, paths)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    # Error messages name the manifest files: show them relative to the repository.
    text = result.stdout.replace(str(ROOT) + "/", "")
    return _TIMESTAMP.sub('"lastTransitionTime": "-"', text)


def new_corpus(count: int = 60) -> None:
    import yaml
    from hypothesis import HealthCheck, given, settings

    from cpx.plugins import PluginHost
    from cpx.testing import strategies

    kinds = strategies.kind_strategies(PluginHost.load(PLUGINS.split(",")))
    drawn: list[list[object]] = []

    @settings(max_examples=count, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(strategies.object_sets(kinds, max_size=12, confused=0.1))
    def collect(objects: list[object]) -> None:
        drawn.append(objects)

    collect()
    CORPUS.mkdir(exist_ok=True)
    for old in CORPUS.glob("fuzz-*.yaml"):
        old.unlink()
    number = 0
    for objects in drawn:
        try:  # some generated objects nest deeper than PyYAML can write
            text = yaml.safe_dump_all(json.loads(json.dumps(objects, default=str)), sort_keys=True)
        except (RecursionError, ValueError):
            continue
        if len(text) > MAX_CASE_BYTES:  # keep the corpus small enough to read
            continue
        (CORPUS / f"fuzz-{number:02d}.yaml").write_text(text)
        number += 1


def update() -> None:
    EXPECTED.mkdir(exist_ok=True)
    for old in EXPECTED.glob("*.json"):
        old.unlink()
    for name, paths in cases().items():
        (EXPECTED / f"{name}.json").write_text(translate(paths))


# -- the tests ----------------------------------------------------------------------------------

CASES = cases()


def test_every_case_has_an_expected_output() -> None:
    assert sorted(p.stem for p in EXPECTED.glob("*.json")) == sorted(CASES)
    assert len(CASES) > 20


@pytest.mark.usefixtures("keep_logging")
@pytest.mark.parametrize("name", sorted(CASES))
def test_translate_output_unchanged(name: str) -> None:
    expected = (EXPECTED / f"{name}.json").read_text()
    assert translate(CASES[name]) == expected


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--update", action="store_true")
    parser.add_argument("--new-corpus", action="store_true")
    args = parser.parse_args()
    if args.new_corpus:
        new_corpus()
    if args.update:
        update()
