"""`python jobs/train.py --help` (the same as `sentray train --help`): every option of the job."""
from sentray.cli import command, exit_process, job_entry_points

parse_config, main = job_entry_points("train")
if __name__ == "__main__":
    exit_process(command("train"))
