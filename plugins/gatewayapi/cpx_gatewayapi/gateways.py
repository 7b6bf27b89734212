"""GatewayClasses and Gateways: which are ours, their listeners in Envoy, and their status."""

from __future__ import annotations

from cpx import SourceView
from cpx.dag import DAG

from cpx_gatewayapi.model import Attachments, Resolution
from cpx_gatewayapi.settings import Settings


def resolve(dag: DAG, source: SourceView, settings: Settings) -> Resolution:
    """The Gateways of our accepted GatewayClasses, with a DAG listener for each programmable
    listener (``GatewayListener.dag_listener``)."""
    return Resolution({})


def report(
    dag: DAG, source: SourceView, resolution: Resolution, attachments: Attachments, settings: Settings
) -> None:
    """GatewayClass and Gateway statuses (``dag.set_status``), attachedRoutes from ``attachments``."""
