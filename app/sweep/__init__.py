"""Parameter sweeps: many runs of one config, spread over a Dask cluster (no Qt, no GPU needed).

``spec`` reads the ``sweep:`` block and expands it into points, ``metrics`` turns a finished run
into one row of numbers, ``runner`` runs the points as Dask tasks (one worker per GPU or per CPU
core group) with resume, and ``table`` writes the tidy table (CSV and Parquet).
"""
