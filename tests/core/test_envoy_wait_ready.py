"""``EnvoyProcess.wait_ready`` against an admin interface that answers late.

While Envoy creates thousands of clusters its main thread, which also answers the admin interface,
is busy for seconds: ``/ready`` then answers after the 5 s an admin request used to wait, and the
wait ended with a TimeoutError long before its own timeout (seen at 10k clusters). A Unix socket
that answers ``/ready`` only after 6 s stands in for that Envoy's admin.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from cpx.testing import EnvoyProcess

LATE = 6.0  # seconds: past the 5 s an admin request waited before


def _answer_late(server: socket.socket) -> None:
    conn, _ = server.accept()
    with conn:
        conn.recv(65536)
        time.sleep(LATE)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nLIVE\n")


def test_wait_ready_waits_for_a_late_admin_answer(tmp_path: Path) -> None:
    envoy = EnvoyProcess({}, workdir=tmp_path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(envoy.admin_socket)
        server.listen(1)
        thread = threading.Thread(target=_answer_late, args=(server,), daemon=True)
        thread.start()
        # A live process in Envoy's place: wait_ready checks that it is still running.
        stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            envoy.proc = stand_in
            envoy._admin = envoy.admin_socket
            started = time.monotonic()
            envoy.wait_ready(timeout=LATE + 10)
            assert time.monotonic() - started >= LATE
        finally:
            stand_in.kill()
            stand_in.wait()
        thread.join(5)
