"""One index run at a time on a table: `IndexRunClaim`, the claim a run of the index job holds
on its table while it runs (the corpus jobs' `RunClaim`, held to a stricter rule).

The claim is a small JSON file beside the table (in `TABLE.lance.claims/`, as a corpus job's claims are in its output folder: beside,
not inside, because a run may drop and recreate the table), refreshed every few seconds. A run
that finds another live claim is refused before it reads or writes anything, naming that run;
two runs that start together both write a claim, and the later one (by the time it wrote it,
then by id) steps back, which needs no atomic create, so it holds on S3 as on a local disk.

A claim is live while its heartbeat is recent; on the host that wrote it, while its process
lives (a killed run's claim is taken over at once, a run paused by SIGSTOP keeps its claim). A
stale claim is reported and removed, and the run goes on: the index record and the rollback of
`index_state` then undo whatever the killed run committed but did not record. Lance's own
commits are optimistic; the project's record is not, so before each commit and each record the
run checks that no other run has taken its table over (`verify`), and stops if one has."""

from __future__ import annotations

import logging
import os
import socket
import time

from sentray.corpus.output_records import STALE_S, Claim, RunClaim
from sentray.kit import storage

logger = logging.getLogger(__name__)
CLAIMS_SUFFIX = ".claims"  # TABLE.lance -> TABLE.lance.claims/


def claims_folder(table: storage.Location) -> storage.Location:
    """Where the claims on the table at `table` are kept."""
    return storage.Location(table.filesystem, table.path.rstrip("/") + CLAIMS_SUFFIX,
                            table.uri.rstrip("/") + CLAIMS_SUFFIX)


def live(claim: Claim, now: float) -> bool:
    """Whether the run that wrote `claim` may still be running."""
    if claim.host == socket.gethostname():
        try:
            os.kill(claim.pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:  # a process of another user: alive
            return True
    return now - claim.heartbeat <= STALE_S


class IndexRunClaim(RunClaim):
    """This index run's claim on `table` (a context manager); ValueError on entry when another
    run holds the table."""

    def __init__(self, table: storage.Location) -> None:
        super().__init__(claims_folder(table), {})
        self.table = table
        self.digest = self.run  # every other run's claim conflicts, whatever its settings
        self.lost = False  # another run took the table over (`verify`)

    def __enter__(self) -> IndexRunClaim:
        self.started = time.time()  # the order of two runs is the order they claimed
        super().__enter__()
        return self

    def _conflicts(self) -> list[Claim]:
        """Live claims of other runs; stale ones are reported and removed."""
        found = []
        now = time.time()
        for claim in self.claims():
            if live(claim, now):
                found.append(claim)
                continue
            logger.warning("%s stopped without releasing its claim on %s (killed?): taking "
                           "the table over; what it committed unrecorded is rolled back",
                           claim.describe(), self.table.uri)
            try:
                self.output.filesystem.delete_file(claim_path(self, claim))
            except FileNotFoundError:  # another run removed it first
                pass
        return found

    def _refuse(self, other: Claim) -> None:
        raise ValueError(f"{self.table.uri} is being indexed by {other.describe()} right now: "
                         "one index run at a time on a table, so this run stops before "
                         "writing anything. Wait for it to finish, or stop it (a stopped "
                         "run's claim is taken over by the next run)")

    def _keep_alive(self) -> None:
        """Refresh the claim, unless another run removed it as stale (this run was stopped
        past its claim's life, on another host): then the table is no longer this run's."""
        if not storage.exists(self.location):
            self.lost = True
        if not self.lost:
            super()._keep_alive()

    def verify(self) -> None:
        """ValueError when another run has taken the table over since this one claimed it:
        this run must not commit or record more."""
        if self.lost or not storage.exists(self.location):
            self.lost = True
            raise ValueError(f"another run took {self.table.uri} over while this run was "
                             "stopped: this run stops without recording more (the table's "
                             "record stays the other run's)")


def claim_path(holder: RunClaim, claim: Claim) -> str:
    return holder.folder.join(f"{claim.run}.json").path
