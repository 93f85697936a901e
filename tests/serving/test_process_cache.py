import threading

from annotation.serving.process_cache import ProcessCache


def test_a_key_is_loaded_once_and_the_cache_stays_within_its_bound():
    cache: ProcessCache[int] = ProcessCache(entries_max=3)
    loads = []

    def load(value):
        loads.append(value)
        return value

    assert [cache.get(("study", n), lambda n=n: load(n)) for n in (1, 2, 1, 2)] == [1, 2, 1, 2]
    assert loads == [1, 2]
    for n in range(3, 10):
        cache.get(("study", n), lambda n=n: load(n))
        assert len(cache.keys()) <= 3
    assert cache.holds(("study", 9)) and not cache.holds(("study", 1))
    cache.clear()
    assert cache.keys() == []


def test_threads_filling_it_at_once_leave_it_consistent():
    cache: ProcessCache[int] = ProcessCache(entries_max=8)

    def fill(offset):
        for n in range(200):
            assert cache.get((offset + n) % 20, lambda n=n: (offset + n) % 20) == (offset + n) % 20

    threads = [threading.Thread(target=fill, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache.keys()) <= 8
