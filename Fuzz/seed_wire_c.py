#!/usr/bin/env python3
"""Writes the seed corpus of the wire-c fuzz target (Fuzz/wire_c.c): one
binary file per vector of Tests/golden/vectors.txt, named after it, into
Fuzz/corpus/wire-c/. The daemon-to-app messages are the ones an app parses;
the app-to-daemon and rejected ones seed the other decoder and the error
paths. Run again after adding vectors: python3 Fuzz/seed_wire_c.py"""
import os

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
out = os.path.join(root, "Fuzz", "corpus", "wire-c")
os.makedirs(out, exist_ok=True)
count = 0
with open(os.path.join(root, "Tests", "golden", "vectors.txt")) as f:
    for line in f:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, hex_bytes = line.split(" ")[:2]
        with open(os.path.join(out, name), "wb") as seed:
            seed.write(b"" if hex_bytes == "-" else bytes.fromhex(hex_bytes))
        count += 1
print(f"{count} seeds in {os.path.relpath(out, root)}")
