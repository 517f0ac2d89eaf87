"""Bar chart of makespan / critical path per DAG and engine, from the scheduling JSON results.

    python -m bench.chart [--quick] [--input PATH] [--output PATH]

By default it reads ``bench/results/scheduling.json`` and writes ``docs/img/makespan.png``; with
--quick it reads ``scheduling-quick.json`` and writes ``bench/results/makespan-quick.png``, so a
CI smoke run never replaces the published figure.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

from bench.report import RESULTS_DIR, result_path

DOCS_IMG = Path(__file__).resolve().parent.parent / "docs" / "img" / "makespan.png"


def plot(results: dict, output: Path) -> Path:
    matplotlib.use("Agg")  # no display; must be chosen before pyplot is imported
    import matplotlib.pyplot as plt

    rows = results["dags"]
    engines = list(dict.fromkeys(e for r in rows for e, m in r["engines"].items() if "ratio" in m))
    width = 0.8 / max(len(engines), 1)
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(rows)), 4.5))
    for i, engine in enumerate(engines):
        xs, ys, lo, hi = [], [], [], []
        for x, row in enumerate(rows):
            m = row["engines"].get(engine, {})
            if "ratio" in m:
                xs.append(x + (i - (len(engines) - 1) / 2) * width)
                ys.append(m["ratio"])
                lo.append(m["ratio"] - min(m["ratios"]))
                hi.append(max(m["ratios"]) - m["ratio"])
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=engine)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(rows)), [r["dag"] for r in rows], rotation=30, ha="right")
    ax.set_ylabel("makespan / critical path (1 = perfect)")
    ax.set_title(
        f"Scheduling quality, median of {results['repeats']} "
        f"(critical path scaled to {results['target_cp_s']} s; bars: min-max)"
    )
    ax.legend()
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=120)
    plt.close(fig)
    return output


def main(argv: list[str] | None = None) -> Path | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--input", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    source = args.input or result_path("scheduling", args.quick)
    output = args.output or (RESULTS_DIR / "makespan-quick.png" if args.quick else DOCS_IMG)
    if not source.exists():
        print(f"chart: {source} not found; run `python -m bench.scheduling` first")
        return None
    path = plot(json.loads(source.read_text()), output)
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()
