#!/bin/sh
# test_layout.sh - the include graph against the architecture (tools/build/layout.py):
# core/ below shim/, tools/ and engine/ on core/ and kernels/ only, no cycle.
python3 tools/build/layout.py
