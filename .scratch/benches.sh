cd /work/wt/scale
export PYTHONPATH=$PWD/src
date -u > .scratch/b_http.txt; nice .venv/bin/python bench/bench_http.py >> .scratch/b_http.txt 2>&1
date -u > .scratch/b_scale.txt; nice .venv/bin/python bench/bench_scale.py >> .scratch/b_scale.txt 2>&1
date -u > .scratch/b_store.txt; nice .venv/bin/python bench/bench_store.py >> .scratch/b_store.txt 2>&1
date -u > .scratch/b_eng.txt; nice .venv/bin/python bench/bench_engines.py >> .scratch/b_eng.txt 2>&1
date -u >> .scratch/b_eng.txt
