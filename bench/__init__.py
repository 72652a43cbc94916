"""Side-by-side benchmarks: each module's ``main()`` prints what it measured (ratios from one run, no assertions).

``python -m bench`` runs them all; ``python -m bench.bus_cycle`` runs one.
"""
