"""How the tools and tests start a lesson's kernel: over Unix sockets, quietly.

jupyter_client gives a kernel five TCP ports by binding port 0 and releasing it; the
kernel binds them a moment later. Two kernels started at once on one machine (the tests'
runs, two at a time on each of two workers) can be given the same port, and the second
dies with "Address already in use" before it replies (CI, 2026-11-28). On Linux the
kernel here listens on ZeroMQ `ipc` sockets in the abstract namespace instead ("@name":
no file, so no folder whose path is too long for a socket), named after a fresh UUID,
so no two kernels can meet. Elsewhere it keeps TCP.
"""

from __future__ import annotations

import sys
import uuid

from jupyter_client.manager import AsyncKernelManager
from traitlets import default

ABSTRACT_SOCKETS = sys.platform == "linux"


class UnixSocketKernelManager(AsyncKernelManager):
    """papermill's and nbclient's kernel manager, on the `ipc` transport where it can be."""

    @default("transport")
    def _transport_default(self) -> str:
        return "ipc" if ABSTRACT_SOCKETS else "tcp"

    @default("ip")
    def _ip_default(self) -> str:
        # The socket of port N is "ipc://@jupyter-<uuid>-N".
        return f"@jupyter-{uuid.uuid4()}" if self.transport == "ipc" else super()._ip_default()


# papermill passes these on: the manager to nbclient, `extra_arguments` to the kernel's
# command line (without the kernel's start-up lines on the terminal of every run).
KERNEL_OPTIONS = {
    "kernel_manager_class": f"{__name__}.{UnixSocketKernelManager.__name__}",
    "extra_arguments": ["--IPKernelApp.log_level=ERROR"],
}
