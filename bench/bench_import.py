"""Import time of ``import tether`` against ``import httpx``, the way a user meets it.

Run: python bench/bench_import.py [PAIRS]   (15 pairs by default; prints the median ratio)

Each import runs in a fresh interpreter, tether and httpx interleaved. click and
rich are made unimportable first: httpx imports its own command line (with
both) whenever they are installed, which would make ``import httpx`` look
slower than it is for a user without them. The script also reports whether
``import tether`` pulled in asyncio.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

BLOCK = """
import sys, time
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("click", "rich"):
            raise ImportError(f"{name} is blocked for this measurement")
        return None
sys.meta_path.insert(0, _Block())
t = time.perf_counter()
import MODULE
print(time.perf_counter() - t, "asyncio" in sys.modules)
"""


def once(module: str) -> tuple[float, bool]:
    out = subprocess.run([sys.executable, "-c", BLOCK.replace("MODULE", module)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    seconds, asyncio_loaded = out.stdout.split()
    return float(seconds), asyncio_loaded == "True"


def main(pairs: int) -> None:
    once("tether"), once("httpx")  # warm the file cache
    times: dict[str, list[float]] = {"tether": [], "httpx": []}
    eager = False
    for _ in range(pairs):
        for module in times:
            seconds, loaded = once(module)
            times[module].append(seconds)
            eager |= module == "tether" and loaded
    med = {m: statistics.median(v) * 1000 for m, v in times.items()}
    print(
        f"import tether {med['tether']:.0f} ms, import httpx {med['httpx']:.0f} ms "
        f"(medians of {pairs} interleaved pairs, "
        f"click and rich blocked): ratio {med['tether'] / med['httpx']:.2f}x; asyncio imported by tether: {eager}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
