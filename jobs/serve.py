"""`python jobs/serve.py --help` (the same as `sentray serve --help`): every option of the job."""
from sentray.cli import job_entry_points

parse_config, main = job_entry_points("serve")
if __name__ == "__main__":
    main()
