"""HTTPRoutes: attachment to Gateway listeners, translation to virtual hosts and routes, status."""

from __future__ import annotations

from cpx import SourceView
from cpx.dag import DAG

from cpx_gatewayapi.model import Attachments, Resolution
from cpx_gatewayapi.settings import Settings


def apply(
    dag: DAG, source: SourceView, resolution: Resolution, attachments: Attachments, settings: Settings
) -> None:
    """Attach every HTTPRoute to the listeners it selects and admits it, add its routes to their
    DAG listeners, count it in ``attachments``, and set its status (``status.parents``)."""
