"""glibc's malloc tuned for the server's requests (gunicorn.conf.py calls it in the master)."""
from __future__ import annotations

# glibc mallopt() parameters (malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
HEAP_BLOCK_MAX = 32 << 20   # blocks below it come from the heap (glibc's upper limit for it)
HEAP_FREE_KEPT = 32 << 20   # free heap kept for the next request before it goes back to the kernel


def keep_freed_memory() -> bool:
    """Lets a request reuse the pages the previous one freed. By default glibc gives large
    freed blocks back to the kernel and each thread's arena drops whole heaps, so every
    request's arrays (a decoded photo, its float32 copy, the model input: ~18 MB for bus.jpg)
    page-fault in again: ~3400 faults, ~10 ms of a 70 ms detect. One arena, blocks under
    32 MB from the heap, 32 MB of free heap kept: no faults. Larger blocks (huge images) are
    still mapped and returned at once. Call before any thread starts (gunicorn.conf.py).
    False where the C library is not glibc (nothing changed)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    # Each one set even if another is refused (mallopt answers 1 when it takes a value).
    taken = [mallopt(param, value) == 1 for param, value in
             ((M_ARENA_MAX, 1), (M_MMAP_THRESHOLD, HEAP_BLOCK_MAX), (M_TRIM_THRESHOLD, HEAP_FREE_KEPT))]
    return all(taken)
