"""`sentray serve`: a long-lived search service on Ray Serve over a table the index job wrote.
Its config (`config`), the checks of a request's body and the one-line reasons of a 400
(`search_requests`), OpenAI's embeddings API's requests, answers and errors (`openai_api`),
concurrent searches run as batches (`query_batches`), the Ray Serve deployment that answers the
HTTP API and serves the search page (`service`, the page itself in page.html), Ray Serve's
direct ingress on the replica's own port (`direct_ingress`, --direct-port), and the job that
starts it on a local or given Ray cluster and stops it on Ctrl-C (`job`).

The pooling catalog gives /info the name the docs call a pooling by; the query precision's
choices (--query-precision) are the query encoder's.

May import: sentray.kit, sentray.corpus, sentray.index, sentray.encode.pooling_catalog,
sentray.bulk_embedding.query_precision.
"""
