"""The GPU path measured in one command: `bash bench/gpu_check.sh` or, from the repository root,
`python -m bench.gpu_check` (__main__.py: the steps, the flags, the report)."""
