"""Per-node OpenVINO CPU times (PERF_COUNT) of a lowered GridSample, f32 hint, 1 thread.
Usage: python profile.py mode pad ac NxCxHxW HoxWo variant [force k=v,...]"""
import sys, os, collections
sys.path.insert(0, "/tmp/h1")
import numpy as np
from speed import compiled, build
from gridsample_lower.models import gridsample_model
from gridsample_lower import lower
mode, pad, ac, xs, os_, variant = sys.argv[1:7]
x_shape = tuple(map(int, xs.split("x"))); out = tuple(map(int, os_.split("x")))
grid_shape = (x_shape[0], *out, len(out))
model = gridsample_model(x_shape, grid_shape, mode, pad, int(ac))
m = build(model, variant)
c = compiled(m, perf=True)
r = c.create_infer_request()
rng = np.random.default_rng(0)
f = [rng.standard_normal(x_shape).astype(np.float32), rng.uniform(-1.1, 1.1, grid_shape).astype(np.float32)]
tot = collections.Counter(); cnt = collections.Counter(); per = collections.Counter()
N = 30
for i in range(N + 3):
    r.infer(f)
    if i < 3: continue
    for p in r.get_profiling_info():
        us = p.real_time.total_seconds() * 1e6
        per[(p.node_name, p.node_type, p.exec_type)] += us / N
        tot[p.node_type] += us / N
print(f"total {sum(tot.values()):.0f} us")
for k, v in tot.most_common(12): print(f"  {k:14s} {v:8.0f} us")
print("top nodes:")
for (n, t, e), v in per.most_common(int(os.environ.get("TOP", 15))): print(f"  {v:8.0f} us {t:12s} {e:24s} {n[:60]}")
