"""The kernel's end of the judge's questions: a Unix socket, answered on a thread.

The grader's first cell (`tools/grading/kernel/cells.py`, before the first TODO cell)
calls `start`, which answers the judge over a Unix socket in the work folder until the
judge is done; each question goes to `answers.answer`. A question about TODO n waits until
TODO n's cell has run, so the judge follows the kernel cell by cell. Each message is its
length (4 bytes, big-endian), then its `wire.py` JSON.
"""

import socket
import struct
import threading

from tools.grading.kernel.inside import answers, wire


def start(address, seconds, namespace):
    """Starts answering the judge, on a thread of its own, at the Unix socket `address`;
    `namespace` holds the notebook's names."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(1)
    server.settimeout(seconds)
    threading.Thread(target=_serve, args=(server, seconds, namespace), daemon=True).start()


def _receive(connection, size):
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the judge left")
        data += chunk
    return data


def _serve(server, seconds, namespace):
    """Answers the judge on the listening `server` until it is done, or `seconds` pass."""
    try:
        connection, _ = server.accept()
        connection.settimeout(seconds)
        while True:
            size = struct.unpack("!I", _receive(connection, 4))[0]
            request = wire.loads(_receive(connection, size))
            if request.get("op") == "done":
                return
            try:
                reply = {"ok": answers.answer(request, namespace)}
            except Exception as error:  # Said to the judge, which reports it for the TODO.
                lines = str(error).strip().splitlines()
                reply = {"error": f"{type(error).__name__}: {lines[-1] if lines else ''}"[:400]}
            message = wire.dumps(reply)
            connection.sendall(struct.pack("!I", len(message)) + message)
    except (OSError, ConnectionError):
        return
    finally:
        server.close()
        answers.finish()  # No judge any more: nothing to wait for.
