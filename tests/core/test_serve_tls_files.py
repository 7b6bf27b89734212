"""``cpx serve`` checks its xDS mTLS files at startup and names the file that is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cpx.cli import cli


def _certgen(outdir: Path) -> Path:
    result = CliRunner().invoke(cli, ["certgen", str(outdir)])
    assert result.exit_code == 0, result.output
    return outdir


def _serve(tmp_path: Path, ca: Path, cert: Path, key: Path) -> tuple[int, str]:
    manifests = tmp_path / "manifests"
    manifests.mkdir(exist_ok=True)
    args = ["serve", "--plugins", "", "--manifests", str(manifests), "--xds-port", "0"]
    args += ["--xds-cafile", str(ca), "--xds-cert-file", str(cert), "--xds-key-file", str(key)]
    result = CliRunner().invoke(cli, args)
    return result.exit_code, result.output


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    return _certgen(tmp_path / "a"), _certgen(tmp_path / "b")


def test_a_key_of_another_certgen_run_is_named(tmp_path: Path, two: tuple[Path, Path]) -> None:
    a, b = two
    code, output = _serve(tmp_path, a / "cacert.pem", a / "cpxcert.pem", b / "cpxkey.pem")
    assert code == 1, output
    assert f"--xds-key-file {b / 'cpxkey.pem'} does not match the certificate" in output
    assert str(a / "cpxcert.pem") in output
    assert "Failed to bind" not in output


@pytest.mark.parametrize(
    ("flag", "what"),
    [
        ("--xds-cafile", "is not a PEM-encoded certificate"),
        ("--xds-cert-file", "is not a PEM-encoded certificate"),
        ("--xds-key-file", "is not a PEM-encoded, unencrypted private key"),
    ],
)
def test_a_file_that_is_not_pem_is_named(
    tmp_path: Path, two: tuple[Path, Path], flag: str, what: str
) -> None:
    a, _ = two
    files = {
        "--xds-cafile": a / "cacert.pem",
        "--xds-cert-file": a / "cpxcert.pem",
        "--xds-key-file": a / "cpxkey.pem",
    }
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not pem\n")
    files[flag] = garbage
    code, output = _serve(tmp_path, *files.values())
    assert code == 1 and f"{flag} {garbage} {what}" in output, output


def test_the_key_given_as_certificate_is_named(tmp_path: Path, two: tuple[Path, Path]) -> None:
    a, _ = two
    code, output = _serve(tmp_path, a / "cacert.pem", a / "cpxkey.pem", a / "cpxkey.pem")
    assert code == 1 and f"--xds-cert-file {a / 'cpxkey.pem'} is not a PEM-encoded certificate" in output
