"""`make bench`: every benchmark of the project, figures printed."""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

NAMES = ("bench_core", "bench_counter", "bench_cli", "bench_tools", "bench_memory", "bench_agent", "bench_spill", "bench_formats",
         "bench_fidelity", "bench_fidelity_eval", "bench_ui", "bench_browse", "bench_scale", "bench_tune", "bench_export",
         "bench_accounting", "bench_proxy")


def main(names=NAMES) -> None:
    for name in names:
        path = HERE / f"{name}.py"
        print(f"== {name}", flush=True)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        mod.main()
        print(flush=True)


# dask's LocalCluster (bench_fidelity) starts its workers by spawning, and a spawned process imports
# this script again as its main module: only a run from the command line runs the benchmarks.
if __name__ == "__main__":
    unknown = [name for name in sys.argv[1:] if name not in NAMES]
    if unknown:
        sys.exit(f"run_all.py: no benchmark {', '.join(unknown)}; the benchmarks: {', '.join(NAMES)}")
    main(tuple(sys.argv[1:]) or NAMES)
