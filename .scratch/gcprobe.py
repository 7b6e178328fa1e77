import asyncio, gc, sys, time, os
sys.argv=[sys.argv[0]]
sys.path.insert(0,"bench")
import bench_scale as b
t=os.environ.get("T")
if t: gc.set_threshold(*map(int,t.split(",")))
for n in (100, 10000):
    r=asyncio.run(b.throughput(n, "memory"))
    print(t, n, round(r["cpu_us_per_step"],1), round(r["steps_per_s"]), gc.get_stats()[2]["collections"], gc.get_stats()[1]["collections"])
