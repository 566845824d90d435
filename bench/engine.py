"""The engine benchmark: a 10^5-node chain, forward + backward, on both gradcalc engines.

    python bench/engine.py

A named entry of the suite in run.py (the same as `python bench/run.py --only "engines chain"`).
"""
import sys

from run import main

if __name__ == "__main__":
    sys.argv[1:1] = ["--only", "engines chain"]
    main()
