"""Status: what the builds computed, reported, and written back to the objects.

* :mod:`cpx.status.reporter`: after each build, the changed statuses are logged, written to the
  ``--status-file`` and handed on; ``cpx translate`` prints the same per object;
* :mod:`cpx.status.updater`: Kubernetes mode, the status subresource written by the leader;
* :mod:`cpx.status.leader`: the leader election (a Lease) that decides which replica writes;
* load-balancer status, by where the address comes from: :mod:`cpx.status.loadbalancer` (the
  ``--ingress-status-address`` flag) and :mod:`cpx.status.loadbalancer_watch` (the Envoy Service).

The status shape of each kind is its plugin's (``StatusWriterSpec``); nothing here names a kind
beyond the core's.
"""
