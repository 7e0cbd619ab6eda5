"""The vector index behind `jobs/index.py` and `jobs/search.py`: the two jobs' configs
(`config`), a table's vector column and the refusal of another embedding's vectors
(`embedding_record`; what the vectors are is the output's `EmbeddingDescription`, and their
query encoder `QueryEncoder`, both sentray.bulk_embedding's), the record of the rows a table
holds and the rollback of a killed run (`index_state`), the rows an output holds that its table
lacks (`rows_to_add`), the LanceDB table opened for a run and those rows read and appended to
it, in this process or through Ray Data (`table_writing`), the ANN index and its defaults
(`ann`), the index job (`job`) and the claim that keeps it to one run at a time on a table
(`run_claim`), and the search, as a function and as a job (`search`), over vectors held in
memory where they fit (`resident`; from 20,000 rows a projected first pass, `projection`;
from 200,000 rows its projected rows in k-means lists, `lists`).

May import: sentray.kit, sentray.corpus, sentray.bulk_embedding.
"""
