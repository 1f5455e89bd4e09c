#!/usr/bin/env python3
"""Projected efficiency of data-parallel linear/linear learning over MPI ranks.

The table of docs/guide/scaling.md ("Past this machine"), computed from its
inputs so that it can be redone when they change: one process's measured
seconds per warm learning iteration, the bytes every L-BFGS evaluation
gathers per factor type, the evaluations per warm fit, and a cost model of
the collectives:

* a ring allgather of V bytes over R ranks takes (R - 1) a + (R - 1)/R V/b
  (a: latency, b: bandwidth), preceded by an allgather of the counts
  ((R - 1) a); every L-BFGS evaluation is one such sum;
* per learning iteration also the objective's per-example terms after each
  message-passing step (an allgather of 8 bytes per example) and a few small
  reductions (largest violations, error counts, the stop flag), 2 ceil(log2 R) a
  each;
* a rank's compute is its block's share of the images: ceil(N/R) of N
  (blocks are whole examples);
* efficiency = one process's time / (R x the slowest rank's time).

Usage: python3 scripts/project_scaling.py [--seconds 22.0] [--evaluations 13.5 16]
"""

import argparse
import math

NETWORKS = {"InfiniBand": (2e-6, 10e9), "10 GbE": (30e-6, 1.1e9)}


def gather_seconds(ranks, volume, latency, bandwidth):
    """One sum over ranks: the counts' allgather, then the ring allgather of `volume` bytes."""
    return 2 * (ranks - 1) * latency + (ranks - 1) / ranks * volume / bandwidth


def project(ranks, images, seconds, volumes, evaluations, network, objective_gathers=2, reductions=4):
    """(compute of the slowest rank, communication, efficiency) per learning iteration."""
    latency, bandwidth = NETWORKS[network]
    compute = seconds * math.ceil(images / ranks) / images
    comm = sum(n * gather_seconds(ranks, v, latency, bandwidth) for v, n in zip(volumes, evaluations))
    comm += objective_gathers * gather_seconds(ranks, 8 * images, latency, bandwidth)
    comm += reductions * 2 * math.ceil(math.log2(ranks)) * latency
    return compute, comm, seconds / (ranks * (compute + comm))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=572, help="training images")
    p.add_argument("--seconds", type=float, default=22.0,
                   help="one process's seconds per warm learning iteration at 20 %% resolution")
    p.add_argument("--volumes", type=float, nargs=2, default=[1.16e6, 1.30e6],
                   help="bytes gathered per L-BFGS evaluation: unary, pairwise (20 %% resolution)")
    p.add_argument("--evaluations", type=float, nargs=2, default=[13.5, 16.0],
                   help="L-BFGS evaluations per warm fit: unary, pairwise")
    p.add_argument("--full-scale", type=float, default=25.0,
                   help="pixels at full resolution / pixels at 20 %% (compute and volumes scale with it)")
    p.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 512])
    args = p.parse_args()

    print("| ranks (2 threads each) | largest block | 20 %: compute / communication, efficiency "
          "(InfiniBand; 10 GbE) | full resolution: compute / communication, efficiency (InfiniBand; 10 GbE) |")
    print("|---|---|---|---|")
    for r in args.ranks:
        cells = []
        for scale in (1.0, args.full_scale):
            seconds, volumes = args.seconds * scale, [v * scale for v in args.volumes]
            compute, comm, ib = project(r, args.images, seconds, volumes, args.evaluations, "InfiniBand")
            _, _, eth = project(r, args.images, seconds, volumes, args.evaluations, "10 GbE")
            unit = f"{comm * 1e3:.0f} ms"
            cells.append(f"{compute:.3g} s / {unit}: **{100 * ib:.1f} %** ({100 * eth:.1f} %)")
        print(f"| {r} | {math.ceil(args.images / r)} images | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
