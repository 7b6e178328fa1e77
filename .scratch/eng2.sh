cd /work/wt/scale
export PYTHONPATH=$PWD/src
o=.scratch/b_eng2.txt
date -u > $o; uptime >> $o
for w in 1 2 4; do echo "celery throughput $w 1000 $(nice .venv/bin/python bench/bench_engines.py --one throughput celery $w 1000 2>&1 | tail -1)" >> $o; done
for e in procrastinate celery; do
  echo "$e latency $(nice .venv/bin/python bench/bench_engines.py --one latency $e 2>&1 | tail -1)" >> $o
  echo "$e kill $(nice .venv/bin/python bench/bench_engines.py --one kill $e 2>&1 | tail -1)" >> $o
done
for w in 4 1 2; do echo "procrastinate throughput $w 10000 $(nice .venv/bin/python bench/bench_engines.py --one throughput procrastinate $w 10000 2>&1 | tail -1)" >> $o; uptime >> $o; done
date -u >> $o
