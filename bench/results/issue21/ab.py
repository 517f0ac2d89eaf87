"""Interleaved A/B of bench.cli's `one` across source trees.

    python ab.py --trees new=/work/main,base=/tmp/cli-w/base --dags fan,airrflow-212 --rounds 3 [--configs quiet,progress]
Each round, per DAG: floor then each (tree, config) in rotating order; prints per-round
makespan/floor and medians.
"""
import argparse, json, os, statistics, sys, tempfile
from pathlib import Path

sys.path.insert(0, "/work/main")
from bench import cli, dags  # noqa: E402
from bench.engines.base import short_ids  # noqa: E402
from bench.engines.planrail_adapter import to_plan  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--trees", default="new=/work/main,base=/tmp/cli-w/base")
ap.add_argument("--dags", default="fan")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--configs", default="quiet,progress")
ap.add_argument("--cp", type=float, default=1.5)
a = ap.parse_args()
trees = dict(t.split("=") for t in a.trees.split(","))
configs = a.configs.split(",")
res: dict = {}
with tempfile.TemporaryDirectory() as tmp:
    plans = {}
    for name in a.dags.split(","):
        dag = short_ids(cli.load(name))
        p = Path(tmp) / f"{name}.json"
        p.write_text(json.dumps(to_plan(dag, a.cp / dags.critical_path(dag))))
        plans[name] = p
    for r in range(a.rounds):
        for name, p in plans.items():
            cli.ROOT = "/work/main"
            fl = cli.one("floor", p)
            combos = [(t, c) for c in configs for t in trees]
            k = r % len(combos)
            combos = combos[k:] + combos[:k]
            line = [f"r{r} {name} floor {fl['makespan_s'] / a.cp:.3f}"]
            for t, c in combos:
                root = trees[t]
                cli.ROOT = f"{root}/src:{root}"
                m = cli.one(c, p)
                if "makespan_s" not in m:
                    line.append(f"{t}/{c} ERR {m}")
                    continue
                ratio = m["makespan_s"] / fl["makespan_s"]
                res.setdefault((name, t, c), []).append(ratio)
                line.append(f"{t}/{c} {ratio:.3f}")
            print(" | ".join(line), f"load {os.getloadavg()[0]:.1f}", flush=True)
print()
for (name, t, c), v in sorted(res.items()):
    print(f"{name:20s} {t:6s} {c:9s} median {statistics.median(v):.3f}  rounds {' '.join(f'{x:.3f}' for x in v)}")
