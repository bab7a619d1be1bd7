"""A fake pool of probe trial processes on one fake GPU (workers.trials.throughput.ProbePool), for the
measuring schedule's tests and the driver's: made-up samples/s, a fake clock every step advances."""

from __future__ import annotations

from workers.trials.throughput import Prepared, Stepped

RO = "reduce-overhead"
BATCH = 64  # tests.factories.digits_spec's batch size

# samples/s of ONE probe process stepping alone, and of each of n stepping together (contention)
ALONE = {
    (1, "none"): 1_000,
    (8, "none"): 2_500,
    (8, RO): 9_000,
    (1, RO): 3_000,
    (4, "none"): 2_000,
    (4, RO): 6_000,
}
TOGETHER = {key: rate * 0.5 for key, rate in ALONE.items()}
COMPILE_S = 8.0


class FakePool:
    """n probe processes on one fake GPU: each prepare and window advances the fake clock."""

    def __init__(self, size: int, clock: list[float], *, same_gpu: bool = True, oom_when_packed=()):
        self.size, self.clock, self.same_gpu = size, clock, same_gpu
        self.oom_when_packed = set(oom_when_packed)
        self.prepared: list[tuple[int, str, int]] = []
        self.windows: list[int] = []
        self.current: tuple[int, str] | None = None
        self.releases = 0

    def prepare(self, config, count, timeout_s):
        k = len(config.get("seeds") or [config["seed"]])
        key = (k, config["compile"])
        cost = COMPILE_S if key[1] == RO else 1.0
        if cost > timeout_s:
            self.clock[0] += timeout_s
            raise TimeoutError("probe warm-up past the bound")
        self.clock[0] += cost
        self.current = key
        self.prepared.append((*key, count))
        results = []
        for index in range(count):
            if count > 1 and index > 0 and key in self.oom_when_packed:
                results.append(Prepared(ok=False, error="OutOfMemoryError: CUDA out of memory"))
            else:
                results.append(
                    Prepared(True, build_s=0.5, warmup_s=cost, warmup_steps=5, samples_per_seed_epoch=1437)
                )
        return results

    def window(self, count, seconds, timeout_s):
        self.clock[0] += seconds
        self.windows.append(count)
        rate = (ALONE if count == 1 else TOGETHER)[self.current]
        steps = max(1, round(rate * seconds / (BATCH * self.current[0])))
        return [Stepped(samples=steps * BATCH * self.current[0], seconds=seconds, steps=steps)] * count

    def release(self):
        self.releases += 1

    def close(self):
        pass
