"""SIFTER's training views and the augmentation job that makes them: the Y and Z rules as pure
functions (`positives`), Y's scope rule (`scope`: negations, downward-entailing words,
embeddings and quantifier phrases, over `dependency_parse`, the one tree form of both parsers;
`operator_lexicon`: their words; `quantifier_phrases`: "at most three", "less than half";
`clause_operators`: a conditional's antecedent, a reporting clause, a privative adjective;
`sentence_units`: the words a backbone needs to be a sentence; `triple_words`: an OpenIE triple
read as X's tokens), the paper's corpus filter (`corpus_filter`), the parsers (`parsers`:
spaCy + triplet-extract's OpenIE; `corenlp`: Stanford CoreNLP through stanza), the job's config
(`config`), its Ray Data callable class (`actor`) and the job itself (`job`, jobs/augment.py).

May import: sentray.kit, sentray.corpus.
"""
