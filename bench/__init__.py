"""The benchmarks. Each bench/X.py is a script (`python bench/X.py`); bench/gpu_check/ is the one
package among them (`python -m bench.gpu_check`, from the repository root)."""
