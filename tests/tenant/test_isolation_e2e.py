"""Issue rows: a crash while translating, and what happens to the changes made meanwhile.

A third-party plugin ("crash", installed for these tests only, from a temporary folder on
PYTHONPATH) raises while building: for any object annotated ``tenant.test/crash`` (cpx must find
which object it is and leave it out), and for every build while a marker file exists (nothing to
blame: the build fails, the last good configuration stays, the changes made meanwhile stay pending).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cpx_httpproxy.testing import valid_httpproxy

from cpx.testing.envoy import envoy_binary
from cpx.testing.tenant import BACKEND, TenantStack, tenant_stack, wait_until

pytestmark = pytest.mark.e2e

PLUGIN = """
from __future__ import annotations

import os
from collections.abc import Iterator

from cpx import Phase, ProcessorSpec, hookimpl


class Crash:
    def __init__(self, config: object) -> None:
        self.marker = os.environ["CPX_TEST_CRASH_MARKER"]

    def run(self, dag: object, source: object) -> None:
        if os.path.exists(self.marker):
            raise RuntimeError("the marker file exists")
        for obj in source.all_objects():
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if "tenant.test/crash" in annotations:
                raise RuntimeError("crashed on a tenant object\\nforged: log line")


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(name="crash", factory=Crash, phase=Phase.FINALIZE)
"""


@pytest.fixture(scope="module")
def crashing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TenantStack, Path]]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("crash")
    site = workdir / "site"
    (site / "cpx_test_crash").mkdir(parents=True)
    (site / "cpx_test_crash" / "__init__.py").write_text(PLUGIN)
    info = site / "cpx_test_crash-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cpx-test-crash\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cpx.plugins]\ncrash = cpx_test_crash\n")
    marker = workdir / "marker"
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "CPX_TEST_CRASH_MARKER")}
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), saved["PYTHONPATH"]) if p)
    os.environ["CPX_TEST_CRASH_MARKER"] = str(marker)
    try:
        with tenant_stack(workdir, valid_object=valid_httpproxy) as stack:
            yield stack, marker
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_a_crash_on_one_object_leaves_out_that_object(crashing: tuple[TenantStack, Path]) -> None:
    stack, _ = crashing
    bad = valid_httpproxy("crasher", "crasher.tenant.test", service=BACKEND)
    bad["metadata"]["annotations"] = {"tenant.test/crash": "yes"}
    shown = stack.check_bad_input(
        "crasher.yaml", [bad], kind="HTTPProxy", name="crasher", problem="TranslationFailed"
    )
    assert "crashed on a tenant object\\x0aforged: log line" in shown  # one line, escaped
    assert not any(line.startswith("forged") for line in stack.cpx.log_text().splitlines())


def test_a_failing_build_keeps_its_changes_and_readyz_says_so(crashing: tuple[TenantStack, Path]) -> None:
    stack, marker = crashing
    control = stack.add_valid("control")
    marker.touch()
    try:
        stack.apply("pending.yaml", [valid_httpproxy("pending", "pending.tenant.test", service=BACKEND)])
        wait_until(lambda: stack.cpx.get("/readyz")[0] == 503, what="/readyz 503")
        _, body = stack.cpx.get("/readyz")
        assert "the last DAG build failed" in body and "marker file exists" in body
        assert stack.cpx.metric("cpx_dag_build_failed") == 1
        assert stack.get(control) == 200  # the last good configuration keeps serving
        assert stack.get("pending.tenant.test") == 404
    finally:
        marker.unlink()
    # No further edit: the pending change is built on a retry.
    stack.wait_served("pending.tenant.test", timeout=10)
    wait_until(lambda: stack.cpx.get("/readyz")[0] == 200, what="/readyz 200")
    assert stack.cpx.metric("cpx_dag_build_failed") == 0
    assert stack.cpx.metric("cpx_dag_build_failures_total") >= 1
    stack.remove("pending.yaml")
