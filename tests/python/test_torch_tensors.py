"""CPU torch tensors as buffers of the array API (found by data_ptr, numel and dtype): every
dtype torch and the C API share, bfloat16 among them, and tensors that require grad. Skipped
where Debian's python3-torch is not installed."""

import pytest

import shmcoll

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64"]


@pytest.mark.parametrize("name", DTYPES)
def test_allreduce_and_allgather(comm, name):
    torch = pytest.importorskip("torch", reason="python3-torch is not installed")
    dt = getattr(torch, name)
    x = torch.full((300,), comm.rank + 1, dtype=dt)
    y = torch.zeros(300, dtype=dt)
    comm.Allreduce(x, y, op=shmcoll.SUM)
    assert (y == comm.size * (comm.size + 1) // 2).all()
    g = torch.zeros(3 * comm.size, dtype=dt)
    comm.Allgather(torch.full((3,), comm.rank, dtype=dt), g)
    assert g.tolist() == [p for p in range(comm.size) for _ in range(3)]


def test_requires_grad_and_bad_tensors(comm):
    torch = pytest.importorskip("torch", reason="python3-torch is not installed")
    w = torch.ones(4, requires_grad=True)
    out = torch.zeros(4)
    comm.Allreduce(w, out)
    assert (out == comm.size).all()
    with pytest.raises(shmcoll.BufferError):
        comm.Allreduce(torch.arange(12.0).reshape(3, 4)[:, 1], torch.zeros(3))
    with pytest.raises(TypeError):
        comm.Allreduce(torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool))
    # The communicator is still usable.
    z = torch.ones(2)
    comm.Allreduce(shmcoll.IN_PLACE, z)
    assert (z == comm.size).all()
