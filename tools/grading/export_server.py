"""The learner's side of a sealed verdict, run inside the submission's kernel.

The grader sends this file's text into the kernel (`sealed.start_code`), after
`export_values.py`'s. Before the first TODO cell, `_grader_start(...)` starts a thread
that answers the judge's questions over a Unix socket in the work folder; right after
each TODO cell, `_grader_keep(n, names, globals())` keeps what the TODO bound; after the
last cell, `_grader_finish()` says no more will come. A question about TODO n waits until
TODO n's cell has run, so the judge follows the kernel cell by cell. Nothing here decides
a verdict: it only describes values (`wire.py` data) and hands over TensorFlow graphs,
which the judge rebuilds and runs in its own process (`judge.py`). So learner code that
changes this code can only send other data or other graphs, which the judge checks like
any.

Rules, as for the guard: standard library, numpy, TensorFlow and the course's `utils`
(framework_internals, checks: imported inside functions) only; every top-level name
starts with `_grader_`; no `from __future__` import; it prints nothing.
"""


def _grader_start(wire, answer, finished, address, seconds, namespace):
    """Starts answering the judge, on a thread of its own, at the Unix socket `address`."""
    import socket
    import threading

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(1)
    server.settimeout(seconds)
    threading.Thread(
        target=_grader_serve, args=(wire, answer, finished, server, seconds, namespace), daemon=True
    ).start()


def _grader_serve(wire, answer, finished, server, seconds, namespace):
    """Answers the judge on the listening `server` until it is done, or `seconds` pass."""
    import struct

    def receive(connection, size):
        data = b""
        while len(data) < size:
            chunk = connection.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the judge left")
            data += chunk
        return data

    try:
        connection, _ = server.accept()
        connection.settimeout(seconds)
        while True:
            request = wire.loads(
                receive(connection, struct.unpack("!I", receive(connection, 4))[0])
            )
            if request.get("op") == "done":
                return
            try:
                reply = {"ok": answer(wire, request, namespace)}
            except Exception as error:  # Said to the judge, which reports it for the TODO.
                lines = str(error).strip().splitlines()
                reply = {"error": f"{type(error).__name__}: {lines[-1] if lines else ''}"[:400]}
            message = wire.dumps(reply)
            connection.sendall(struct.pack("!I", len(message)) + message)
    except (OSError, ConnectionError):
        return
    finally:
        server.close()
        finished.append(True)  # No judge any more: nothing to wait for.
