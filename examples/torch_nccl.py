#!/usr/bin/env python3
"""torch.distributed's nccl backend on zinc's libnccl.so.2, every result checked.

Runs, on one process per GPU: all_reduce (several types, ops and sizes, PreMulSum included),
all_gather_into_tensor, reduce_scatter_tensor, broadcast, all_to_all_single (equal and unequal
splits), send/recv (pairs, and a ring through batch_isend_irecv), new_group (split from the
default communicator because the process group is bound to a device), and a short
DistributedDataParallel training loop whose parameters must equal, on every rank, those of the
same model trained in one process on the whole batch.

PyTorch's wheels find their own NCCL through an RPATH, which LD_LIBRARY_PATH does not override;
LD_PRELOAD does, because the loader then reuses the soname already loaded:

    LD_PRELOAD=$PWD/build/lib/libnccl.so.2 torchrun --nproc-per-node 4 examples/torch_nccl.py

(examples/torch-on-zinc.sh does that and checks which library the ranks loaded.) A program
that links libnccl.so.2 without an RPATH takes zinc through LD_LIBRARY_PATH=$PWD/build/lib.

Exit status 0 when every check passed on every rank; each rank prints its failures.
"""
import ctypes
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

failures = []


def check(name, got, want, rtol=0.0, atol=0.0):
    got, want = got.detach().cpu(), want.detach().cpu()
    if got.shape != want.shape:
        failures.append(f"{name}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
        return
    if rtol == 0.0 and atol == 0.0:
        ok = torch.equal(got, want)
    else:
        ok = torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol)
    if not ok:
        diff = (got.double() - want.double()).abs()
        i = int(diff.argmax())
        failures.append(f"{name}: element {i} is {got.flatten()[i].item()}, "
                        f"expected {want.flatten()[i].item()}")


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def loaded_nccl():
    """Which file provides the NCCL symbols PyTorch binds to, its API level and zinc's version.

    PyTorch's import may map its wheel's libnccl.so.2 by full path as well; what matters is the
    definition that symbol lookup finds first in the process's global scope (preloaded
    libraries come right after the executable), which dlsym on the global handle reports."""
    mapped = set()
    with open("/proc/self/maps") as f:
        for line in f:
            if "libnccl" in line:
                mapped.add(line.split()[-1])
    glob = ctypes.CDLL(None)
    try:
        addr = ctypes.cast(glob.ncclAllReduce, ctypes.c_void_p).value
    except AttributeError:
        return None, None, None, sorted(mapped)
    info = _DlInfo()
    ctypes.CDLL("libc.so.6").dladdr(ctypes.c_void_p(addr), ctypes.byref(info))
    path = os.path.realpath(info.dli_fname.decode())
    lib = ctypes.CDLL(path)
    v = ctypes.c_int()
    lib.ncclGetVersion(ctypes.byref(v))
    zinc = None
    if hasattr(lib, "zincGetVersionString"):
        lib.zincGetVersionString.restype = ctypes.c_char_p
        zinc = lib.zincGetVersionString().decode()
    return path, v.value, zinc, sorted(mapped)


def collectives(rank, n, dev):
    # all_reduce: sizes from one element to 32 Mi, several types and ops.
    for count in (1, 7, 1000, 1 << 16, (1 << 20) + 3, 1 << 25):
        x = torch.full((count,), float(rank + 1), device=dev)
        x[0] = rank  # one element whose value differs per rank in a second way
        dist.all_reduce(x)
        want = torch.full((count,), float(n * (n + 1) // 2))
        want[0] = n * (n - 1) // 2
        check(f"all_reduce float32 sum count={count}", x, want)
    for dtype in (torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.float64):
        x = (torch.arange(4099, device=dev) % 13 + rank).to(dtype)
        dist.all_reduce(x)
        want = (torch.arange(4099) % 13 * n + n * (n - 1) // 2).to(dtype)
        check(f"all_reduce {dtype} sum", x, want)
    base = torch.arange(100003, device=dev, dtype=torch.float32)
    for op, want in ((dist.ReduceOp.MAX, base.cpu() + (n - 1)), (dist.ReduceOp.MIN, base.cpu()),
                     (dist.ReduceOp.AVG, base.cpu() + (n - 1) / 2)):
        x = base + rank
        dist.all_reduce(x, op=op)
        check(f"all_reduce float32 {op}", x, want, rtol=1e-6)
    x = torch.ones(5000, device=dev) * (rank + 1)
    x8 = x.clone()
    dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
    check("all_reduce float32 product", x, torch.full((5000,), float(torch.arange(1, n + 1).prod())))
    if hasattr(dist, "_make_nccl_premul_sum"):
        dist.all_reduce(x8, op=dist._make_nccl_premul_sum(0.5))
        check("all_reduce premul_sum(0.5)", x8, torch.full((5000,), n * (n + 1) / 4))

    # all_gather_into_tensor, reduce_scatter_tensor
    for count in (3, 1 << 20):
        mine = torch.arange(count, device=dev, dtype=torch.float32) + 1000 * rank
        out = torch.empty(n * count, device=dev)
        dist.all_gather_into_tensor(out, mine)
        want = torch.cat([torch.arange(count, dtype=torch.float32) + 1000 * r for r in range(n)])
        check(f"all_gather_into_tensor count={count}", out, want)

        inp = torch.cat([torch.arange(count, device=dev, dtype=torch.float32) * (r + 1) + rank
                         for r in range(n)])
        out = torch.empty(count, device=dev)
        dist.reduce_scatter_tensor(out, inp)
        want = torch.arange(count, dtype=torch.float32) * (rank + 1) * n + n * (n - 1) // 2
        check(f"reduce_scatter_tensor count={count}", out, want)

    # broadcast from a root that is not 0
    root = n - 1
    for count in (11, 1 << 22):
        x = (torch.arange(count, device=dev, dtype=torch.float32) * 3 if rank == root else
             torch.full((count,), -1.0, device=dev))
        dist.broadcast(x, src=root)
        check(f"broadcast root={root} count={count}", x, torch.arange(count, dtype=torch.float32) * 3)

    # all_to_all_single: equal splits, then unequal ones (rank r sends r+d+1 elements to d)
    k = 1 << 16
    inp = torch.arange(n * k, device=dev, dtype=torch.float32) + 1e6 * rank
    out = torch.empty(n * k, device=dev)
    dist.all_to_all_single(out, inp)
    want = torch.cat([torch.arange(rank * k, (rank + 1) * k, dtype=torch.float32) + 1e6 * s
                      for s in range(n)])
    check("all_to_all_single equal", out, want)
    send_splits = [rank + d + 1 for d in range(n)]
    recv_splits = [s + rank + 1 for s in range(n)]
    inp = torch.cat([torch.full((send_splits[d],), float(100 * rank + d), device=dev)
                     for d in range(n)])
    out = torch.empty(sum(recv_splits), device=dev)
    dist.all_to_all_single(out, inp, recv_splits, send_splits)
    want = torch.cat([torch.full((recv_splits[s],), float(100 * s + rank)) for s in range(n)])
    check("all_to_all_single unequal", out, want)

    # send/recv: pairs (0<->1, 2<->3, ...) with the blocking calls
    if n % 2 == 0:
        peer = rank ^ 1
        mine = torch.arange(1 << 18, device=dev, dtype=torch.float32) + rank
        got = torch.empty_like(mine)
        if rank % 2 == 0:
            dist.send(mine, dst=peer)
            dist.recv(got, src=peer)
        else:
            dist.recv(got, src=peer)
            dist.send(mine, dst=peer)
        check("send/recv pair", got, torch.arange(1 << 18, dtype=torch.float32) + peer)
    # a ring in one batch: send to the next rank, receive from the previous one
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    mine = torch.full((1 << 20,), float(rank), device=dev)
    got = torch.empty_like(mine)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, nxt),
                                   dist.P2POp(dist.irecv, got, prv)])
    for r in reqs:
        r.wait()
    check("batch_isend_irecv ring", got, torch.full((1 << 20,), float(prv)))

    # new_group: evens and odds (ncclCommSplit of the default communicator)
    evens = list(range(0, n, 2))
    odds = list(range(1, n, 2))
    g_even = dist.new_group(evens)
    g_odd = dist.new_group(odds) if odds else None
    mine_group = evens if rank % 2 == 0 else odds
    g = g_even if rank % 2 == 0 else g_odd
    x = torch.full((12345,), float(rank), device=dev)
    dist.all_reduce(x, group=g)
    check("new_group all_reduce", x, torch.full((12345,), float(sum(mine_group))))
    out = torch.empty(len(mine_group) * 10, device=dev)
    dist.all_gather_into_tensor(out, torch.full((10,), float(rank), device=dev), group=g)
    check("new_group all_gather", out,
          torch.cat([torch.full((10,), float(r)) for r in mine_group]))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(),
                                  nn.Linear(256, 10))

    def forward(self, x):
        return self.body(x)


def ddp(rank, n, dev, steps=20, per_rank=64):
    """DDP on n ranks against the same model trained in one process on the whole batch."""
    torch.manual_seed(1234)
    ref = Net().to(dev)
    torch.manual_seed(1234)
    model = Net().to(dev)
    with torch.no_grad():  # the DDP replica starts from different weights on every rank...
        for p in model.parameters():
            p.add_(0.01 * (rank + 1))
    ddp_model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index],
                                                    bucket_cap_mb=1)
    # ...and DDP's constructor broadcasts rank 0's, which are ref's plus 0.01
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.01)
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(99)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(steps):
        xs = torch.randn(n * per_rank, 32, generator=gen).to(dev)
        ys = torch.randint(0, 10, (n * per_rank,), generator=gen).to(dev)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        opt.zero_grad()
        loss = loss_fn(ddp_model(xs[mine]), ys[mine])
        loss.backward()  # gradients averaged across ranks by DDP's bucketed all_reduce
        opt.step()
        ref_opt.zero_grad()
        loss_fn(ref(xs), ys).backward()
        ref_opt.step()
    flat = torch.cat([p.detach().flatten() for p in ddp_model.parameters()])
    every = torch.empty(n * flat.numel(), device=dev)
    dist.all_gather_into_tensor(every, flat)
    for r in range(n):
        check(f"DDP parameters rank {r} == rank {rank}", every[r * flat.numel():(r + 1) * flat.numel()],
              flat)
    ref_flat = torch.cat([p.detach().flatten() for p in ref.parameters()])
    check("DDP parameters == single-process reference", flat, ref_flat, rtol=1e-4, atol=1e-5)
    return float(loss.detach())


def main():
    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    # Binding the process group to the device makes PyTorch create the communicator now and
    # build new_group()s with ncclCommSplit.
    dist.init_process_group("nccl", device_id=dev)
    path, api, zinc, mapped = loaded_nccl()
    if rank == 0:
        print(f"torch {torch.__version__}, {n} ranks; ncclAllReduce resolves to {path}: NCCL API "
              f"{api}" + (f", zinc {zinc}" if zinc else " (not zinc)")
              + f"; libnccl files mapped: {', '.join(mapped)}", flush=True)
    if os.environ.get("REQUIRE_ZINC") == "1" and not zinc:
        failures.append(f"rank {rank} loaded {path}, which is not zinc")
    collectives(rank, n, dev)
    loss = ddp(rank, n, dev)
    torch.cuda.synchronize()
    ok = torch.tensor([len(failures)], device=dev)
    dist.all_reduce(ok)
    for f in failures:
        print(f"rank {rank}: FAILED {f}", flush=True)
    if rank == 0:
        print(f"DDP: 20 steps, final loss {loss:.4f}", flush=True)
        print("all checks passed" if int(ok) == 0 else f"{int(ok)} check(s) failed", flush=True)
    dist.destroy_process_group()
    sys.exit(0 if int(ok) == 0 else 1)


if __name__ == "__main__":
    main()
