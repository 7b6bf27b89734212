"""mTLS of the xDS server (Contour: ``--contour-cafile``, ``--contour-cert-file``, ``--contour-key-file``)."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import grpc

PathLike = str | os.PathLike[str]


def _require(
    instance: ServerTLS, attribute: attrs.Attribute[PathLike | None], value: PathLike | None
) -> None:
    # Like Contour: half a TLS configuration is an error, never a silent fallback to plaintext.
    if value is None or str(value) == "":
        raise ValueError(f"xDS TLS needs ca_file, cert_file and key_file; {attribute.name} is missing")


@attrs.frozen
class ServerTLS:
    """Files for the server's mTLS: Envoy must present a client certificate signed by ``ca_file``.

    The files are read once, at :meth:`credentials` (certificate rotation needs a restart).
    """

    ca_file: PathLike | None = attrs.field(validator=_require)
    cert_file: PathLike | None = attrs.field(validator=_require)
    key_file: PathLike | None = attrs.field(validator=_require)

    def credentials(self) -> grpc.ServerCredentials:
        assert self.ca_file is not None and self.cert_file is not None and self.key_file is not None
        return grpc.ssl_server_credentials(
            [(Path(self.key_file).read_bytes(), Path(self.cert_file).read_bytes())],
            root_certificates=Path(self.ca_file).read_bytes(),
            require_client_auth=True,
        )
