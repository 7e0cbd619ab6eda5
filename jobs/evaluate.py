"""`python jobs/evaluate.py --help` (the same as `sentray evaluate --help`): every option of the job."""
from sentray.cli import command, job_entry_points

parse_config, main = job_entry_points("evaluate")
if __name__ == "__main__":
    raise SystemExit(command("evaluate"))
