#!/usr/bin/env python3
"""A misbehaving library app for the hardening tests: it waits for its first
event on the app channel (fd 3, as lifecycled hands it over) and then breaks
the protocol in the way MODE says. The daemon must kill it with a recorded
reason and carry on with every other app.

Usage: rogue.py MODE   (garbage, bad-version, daemon-type, truncated,
                        trailing, oversized, ack-unsent, flood, bad-name)

save-loop is not a rogue: it acknowledges every event and saves 64 KiB of
restoration data (every byte the same, a counter) 200 times a second, for
the test that kills the daemon while it writes them."""
import os
import signal
import socket
import struct
import sys

mode = sys.argv[1]
fd = int(os.environ["LIFECYCLE_FD"])
sock = socket.socket(fileno=fd)
first = sock.recv(4096)          # willFinishLaunching
seq = struct.unpack_from("<I", first, 4)[0]


def header(kind, ident, version=1, flags=0):
    return struct.pack("<BBHI", version, kind, flags, ident)


if mode == "save-loop":
    import select
    import time
    sock.send(header(0x81, seq))
    n = 0
    while True:
        while select.select([sock], [], [], 0)[0]:
            m = sock.recv(70000)
            if not m:
                sys.exit(0)
            if m[1] == 0x01:
                sock.send(header(0x81, struct.unpack_from("<I", m, 4)[0]))
                if m[8] == 7:           # willTerminate
                    sys.exit(0)
        n += 1
        sock.send(header(0x86, 0) + struct.pack("<I", 65536) + bytes([n % 256]) * 65536)
        time.sleep(0.005)
elif mode == "garbage":
    sock.send(b"\x99" * 11)
elif mode == "bad-version":
    sock.send(header(0x81, seq, version=2))
elif mode == "daemon-type":
    sock.send(header(0x01, seq))
elif mode == "truncated":
    sock.send(header(0x81, seq)[:6])
elif mode == "trailing":
    sock.send(header(0x81, seq) + b"\x00")
elif mode == "oversized":
    # Larger than any message may be (Wire.maxMessageSize, 66560 bytes).
    sock.send(header(0x86, 0) + struct.pack("<I", 70000) + b"x" * 70000)
elif mode == "ack-unsent":
    sock.send(header(0x81, seq + 1000))
elif mode == "bad-name":
    sock.send(header(0x82, 1) + struct.pack("<H", 2) + b"\xff\xfe")
elif mode == "flood":
    sock.setblocking(False)
    request = 0
    while True:                    # begin tasks as fast as it can, never reading a reply
        request += 1
        try:
            sock.send(header(0x82, request) + struct.pack("<H", 1) + b"t")
        except BlockingIOError:
            try:
                sock.recv(4096)
            except BlockingIOError:
                pass
else:
    sys.exit("unknown mode " + mode)
# Then wait to be killed.
while True:
    signal.pause()
