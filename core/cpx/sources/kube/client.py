"""The Kubernetes API client cpx uses: from a kubeconfig file or the pod's service account.

The ``kubernetes`` package's client is synchronous (urllib3); cpx calls it from threads.  It has
no client-side rate limiter (client-go's QPS/burst), so none is configured here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kubernetes import client, config

from cpx.errors import ConfigError

# Each watcher holds one long-lived connection; connections are opened lazily, so a roomy pool
# costs nothing and avoids urllib3 discarding (and re-opening) connections under load.
DEFAULT_POOL_SIZE = 64


def new_api_client(
    kubeconfig: str | Path | None = None,
    *,
    incluster: bool = False,
    context: str | None = None,
    pool_size: int = DEFAULT_POOL_SIZE,
) -> Any:
    """An ``ApiClient`` for the cluster ``kubeconfig`` names (or, with ``incluster``, this pod's).

    Raises :class:`ConfigError` with the loader's reason when the configuration is unusable.
    """
    if incluster == (kubeconfig is not None):
        raise ConfigError("use exactly one of a kubeconfig file and the in-cluster configuration")
    configuration = client.Configuration()
    try:
        if incluster:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig),
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (config.ConfigException, OSError, ValueError, TypeError) as err:
        where = "in-cluster configuration" if incluster else f"kubeconfig {kubeconfig}"
        raise ConfigError(f"cannot load the {where}: {err}") from None
    configuration.connection_pool_maxsize = max(pool_size, configuration.connection_pool_maxsize or 0)
    # urllib3 warns about every retried connection; cpx's watchers report an outage once each.
    if not logging.getLogger("cpx").isEnabledFor(logging.DEBUG):
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    return client.ApiClient(configuration)


def server_of(api_client: Any) -> str:
    """The API server's URL, for log messages."""
    return str(api_client.configuration.host)
