"""Draw busbw against message size for zinc and NCCL from gpu-vs-nccl.sh's tables."""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    sizes, bw = [], []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 12 and p[0].isdigit():
                sizes.append(int(p[0]))
                bw.append(float(p[7]))
    return sizes, bw


def main():
    out, coll, n = sys.argv[1], sys.argv[2], sys.argv[3]
    fig, ax = plt.subplots(figsize=(9, 5))
    styles = {"zinc": "-", "nccl": "--"}
    for lib in ("zinc", "nccl"):
        for model in ("threads", "procs"):
            path = os.path.join(out, f"{lib}_{model}.txt")
            if not os.path.exists(path):
                continue
            x, y = read(path)
            ax.plot(x, y, styles[lib], marker="o", markersize=3,
                    label=f"{'zinc' if lib == 'zinc' else 'NCCL'} ({model})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{coll}, float sum, {n} GPUs")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "busbw.png"), dpi=110)


if __name__ == "__main__":
    main()
