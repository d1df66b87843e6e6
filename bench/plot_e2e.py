#!/usr/bin/env python3
"""Plots bench/e2e.py's results (a JSON with "rows") as tokens/s and peak
memory per variant, without and with LoRA, into a PNG.

    python3 bench/plot_e2e.py bench/results/e2e-2026-11-30.json docs/e2e-2026-11-30.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["eager", "compile", "liger-kernel", "liger"]


def main(src, dest):
    data = json.load(open(src))
    rows = {r["variant"]: r for r in data["rows"]}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, label in ((axes[0], "tokens_per_s", "tokens/s (thousands)"),
                           (axes[1], "peak_gib", "peak memory (GiB)")):
        for i, suffix in enumerate(("", "+lora")):
            names = [v for v in ORDER if v + suffix in rows]
            values = [rows[v + suffix][key] / (1e3 if key == "tokens_per_s" else 1)
                      for v in names]
            xs = [j + 0.4 * i for j in range(len(names))]
            bars = ax.bar(xs, values, width=0.38,
                          label="full fine-tuning" if not suffix else "LoRA r=16 on q/k/v/o")
            for x, v in zip(xs, values):
                ax.text(x, v, "%.1f" % v, ha="center", va="bottom", fontsize=8)
            del bars
        ax.set_xticks([j + 0.2 for j in range(len(ORDER))])
        ax.set_xticklabels(ORDER)
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    fig.suptitle("One training step, %s (%s)" % (data["model"], data["date"]), fontsize=9)
    fig.tight_layout()
    fig.savefig(dest, dpi=110)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
