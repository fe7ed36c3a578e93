"""A fake `torch` for the framework-counter test (watch/tests, case cuda_fake_torch_counters):
only torch.cuda's memory counters, as if a caching allocator kept 1 MiB allocated and reserved
1 KiB more at every step."""


class _Cuda:
    def __init__(self):
        self._reads = 0

    def is_available(self):
        return True

    def memory_allocated(self):
        return 1 << 20

    def memory_reserved(self):
        self._reads += 1
        return (2 << 20) + 1024 * self._reads


cuda = _Cuda()
