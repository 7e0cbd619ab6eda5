"""`python jobs/index.py --help` (the same as `sentray index --help`): every option of the job."""
from sentray.cli import command, exit_process, job_entry_points

parse_config, main = job_entry_points("index")
if __name__ == "__main__":
    exit_process(command("index"))
