"""Precision of lowered GridSample + 1x1 Conv on OpenVINO CPU at default (bf16) and f32 hint.

Usage: python prec.py [--variant NAME] ; variants are functions taking (model)->lowered model.
"""
import sys, os, io, argparse, importlib
import numpy as np, onnx, onnxruntime as ort, openvino as ov
from onnx import helper, numpy_helper
sys.path.insert(0, "/tmp/h1")
from gridsample_lower import lower
from gridsample_lower.models import gridsample_model

CONFIGS = [("linear", "zeros", 0), ("nearest", "border", 1), ("cubic", "reflection", 0)]
X_SHAPE, GRID_SHAPE = (1, 16, 32, 40), (1, 24, 28, 2)

def with_conv(model, seed=1):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 16, 1, 1)).astype(np.float32) / 4
    b = rng.standard_normal(8).astype(np.float32) / 4
    g = model.graph
    g.initializer.extend([numpy_helper.from_array(w, "convW"), numpy_helper.from_array(b, "convB")])
    g.node.append(helper.make_node("Conv", ["Y", "convW", "convB"], ["Z"], name="conv"))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("Z", onnx.TensorProto.FLOAT, None))
    return model

def base_model(cfg):
    return with_conv(gridsample_model(X_SHAPE, GRID_SHAPE, *cfg))

def feeds(seed=0):
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal(X_SHAPE).astype(np.float32),
            "grid": rng.uniform(-1.1, 1.1, GRID_SHAPE).astype(np.float32)}

def ort_run(model, f):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, f)[0]

CORE = ov.Core()
def ov_compile(model, f32=False):
    m = CORE.read_model(model=model.SerializeToString(), weights=b"")
    cfg = {"INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1}
    if f32:
        cfg["INFERENCE_PRECISION_HINT"] = "f32"
    return CORE.compile_model(m, "CPU", cfg)

def ov_run(model, f, f32=False):
    c = ov_compile(model, f32)
    return c([f["X"], f["grid"]])[0]

def runtime_precisions(model):
    c = ov_compile(model)
    out = []
    for op in c.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        g = lambda k: rt[k].astype(str) if k in rt else "-"
        out.append((op.get_friendly_name(), g("layerType"), g("runtimePrecision"),
                    g("outputPrecisions"), g("originalLayersNames")))
    return out

def lowered(model, target):
    return lower(model, target=target, lower_all=True)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="")  # module:function names that map (model, target)->model
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    forms = {"native": lambda m: m,
             "generic": lambda m: lowered(m, "generic"),
             "openvino": lambda m: lowered(m, "openvino")}
    for spec in filter(None, a.variants.split(",")):
        mod, fn = spec.split(":")
        forms[fn] = getattr(importlib.import_module(mod), fn)
    print(f"{'config':28s} " + " ".join(f"{k:>22s}" for k in forms))
    print(f"{'':28s} " + " ".join(f"{'bf16-default / f32':>22s}" for k in forms))
    for cfg in CONFIGS:
        m = base_model(cfg)
        built = {k: fn(onnx.ModelProto.FromString(m.SerializeToString())) for k, fn in forms.items()}
        errs = {k: [0.0, 0.0] for k in forms}
        for seed in range(a.seeds):
            f = feeds(seed)
            truth = ort_run(m, f)
            for k, mm in built.items():
                errs[k][0] = max(errs[k][0], float(np.abs(ov_run(mm, f) - truth).max()))
                errs[k][1] = max(errs[k][1], float(np.abs(ov_run(mm, f, True) - truth).max()))
        print(f"{'/'.join(map(str,cfg)):28s} " + " ".join(f"{e[0]:>11.4g} /{e[1]:>9.2g}" for e in errs.values()), flush=True)

if __name__ == "__main__":
    main()
