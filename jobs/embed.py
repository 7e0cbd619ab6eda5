"""`python jobs/embed.py --help` (the same as `sentray embed --help`): every option of the job."""
from sentray.cli import command, exit_process, job_entry_points

parse_config, main = job_entry_points("embed")
if __name__ == "__main__":
    exit_process(command("embed"))
