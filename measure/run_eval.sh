#!/usr/bin/env bash
# usage: measure/run_eval.sh LABEL MODEL [DATASET]   (runs from a scratch copy so the worktree can change meanwhile)
set -u
label=$1; model=$2; ds=${3:-tether-tasks}; shift 3 2>/dev/null || shift $#
cd /work/wt/local
start=$(date +%s)
PYTHONPATH=${SRC:-$PWD/src} nice -n 10 .venv/bin/python -m tether eval run "$ds" --model "$model" --concurrency 1 --name "$label" \
  --store "sqlite:///$PWD/measure/$label.db" --json "measure/$label.json" --no-progress "$@" > "measure/$label.txt" 2>&1
echo "rc=$? wall=$(( $(date +%s) - start ))s" >> "measure/$label.txt"
