#!/bin/bash
# A training job's launcher script, as a team writes one: set-up, the trainer as a child of the
# shell, then a word at the end. `train.sh PYTHON BUG STEPS` runs torch_mlp.py BUG step_on STEPS
# (watch/tests: torch_tree_script_leak / _clean, judged like the trainer started directly).
set -eu
python=$1 bug=$2 steps=$3
here=$(cd "$(dirname "$0")" && pwd)
echo "train.sh: starting the trainer ($bug, $steps steps)"
"$python" "$here/torch_mlp.py" "$bug" step_on "$steps"
echo "train.sh: done"
