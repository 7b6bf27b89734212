"""cpx-tlsdelegation: Project Contour's TLSCertificateDelegation (projectcontour.io/v1).

A delegation, in the namespace of the Secrets it names, lets HTTPProxies and Ingresses of other
namespaces use them; the plugin answers the core's secret-access policy
(``cpx_secret_access_permitted``) with it.  See docs/design/0024-tls-delegation.md.
"""

from __future__ import annotations
