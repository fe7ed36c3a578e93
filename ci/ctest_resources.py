#!/usr/bin/env python3
"""Writes a CTest resource specification with one `gpus` slot per GPU that nvidia-smi lists.

Tests labelled gpu carry RESOURCE_GROUPS "gpus:1"; with --resource-spec-file, ctest -j N runs
them concurrently, one GPU each, and tells each test its GPU through CTEST_RESOURCE_GROUP_0_GPUS,
which the test binaries map to CUDA_VISIBLE_DEVICES (see docs/cuda.md)."""
import json
import subprocess

try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True).stdout
    gpus = [line.strip() for line in out.splitlines() if line.strip()]
except (OSError, subprocess.CalledProcessError):
    gpus = []
spec = {"version": {"major": 1, "minor": 0},
        "local": [{"gpus": [{"id": g, "slots": 1} for g in gpus]}]}
print(json.dumps(spec, indent=2))
