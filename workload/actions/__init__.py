"""Action step types: the benchmark runners (MLPerf harness in a container, LoadGen on CPU)."""
