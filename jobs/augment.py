"""`python jobs/augment.py --help` (the same as `sentray augment --help`): every option of the job."""
from sentray.cli import command, job_entry_points
from sentray.kit.exit_status import exit_process

parse_config, main = job_entry_points("augment")
if __name__ == "__main__":
    exit_process(command("augment"))
