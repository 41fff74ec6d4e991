#!/usr/bin/env python3
"""A library app as clients were before the resume extension of protocol 1
(docs/protocol.md): it acknowledges every event on fd 3 and ends when the
channel does, ignoring LIFECYCLE_RESUME_SOCKET. The restart tests check
that such an app ends with the daemon, and that the next daemon records it."""
import os
import socket
import struct
import sys

sock = socket.socket(fileno=int(os.environ["LIFECYCLE_FD"]))
while True:
    message = sock.recv(4096)
    if not message:
        sys.stderr.write("old-client: lifecycled closed the channel; exiting\n")
        sys.exit(1)
    version, kind, flags, ident = struct.unpack_from("<BBHI", message)
    if kind == 0x01:  # an event: acknowledge it
        sock.send(struct.pack("<BBHI", 1, 0x81, 0, ident))
        if message[8] == 7:  # willTerminate
            sys.exit(0)
